package manifests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Report is what WriteReport shows: manifests, how they load, and what one
// cluster, or each of several feature sets, makes of them.
type Report struct {
	Manifests  []manifest.Manifest
	LoadErrors []error
	// Cluster is evaluated as it is when Cluster.Features is set: one
	// column, named by its feature set. Otherwise there is one column per
	// FeatureSets, each with no gate enabled (there are no gates to ask
	// about) and the rest of Cluster.
	Cluster manifest.Cluster
	// FeatureSets names the columns when Cluster.Features is nil; empty
	// means every known feature set. An unknown name is an error, as it
	// would silently exclude everything annotated.
	FeatureSets []string
}

// WriteReport writes, for each manifest, the decision of Include in each
// column of r, then the load errors, the manifests decided invalid (once
// each, however many columns) and the duplicates among the manifests a
// column keeps.
//
// format "" or "table" is an aligned text table with one column per feature
// set and the reasons last; "json" is a single JSON object
// {"profile", "featureSets", "cluster", "manifests": [...], "errors": [...]}.
// Load errors and duplicates do not make WriteReport fail; the caller
// decides the exit code (HasErrors).
func WriteReport(w io.Writer, r Report, format string) error {
	cols, err := reportColumns(r)
	if err != nil {
		return err
	}
	for i, m := range r.Manifests {
		if m.Object == nil { // not from manifest.Load; report it rather than panic
			m.Object = &unstructured.Unstructured{Object: map[string]interface{}{}}
			r.Manifests[i] = m
		}
	}
	rows := make([]reportRow, len(r.Manifests))
	for i, m := range r.Manifests {
		rows[i] = reportRow{m: m, decisions: make([]manifest.Decision, len(cols))}
	}
	errs := slices.Clone(r.LoadErrors)
	sets := make([]string, len(cols))
	invalid := map[string]bool{}
	for j, col := range cols {
		sets[j] = col.FeatureSetName()
		c := r.Cluster
		c.Features = col
		ds, decideErrs := manifest.Decide(r.Manifests, c)
		for i := range rows {
			rows[i].decisions[j] = ds[i]
		}
		errs = appendColumnErrors(errs, sets[j], decideErrs, invalid)
	}
	switch format {
	case "", "table":
		return writeTable(w, rows, errs, sets)
	case "json":
		return writeJSON(w, rows, errs, sets, r.Cluster)
	default:
		return fmt.Errorf("unknown report format %q (want table or json)", format)
	}
}

// appendColumnErrors appends the errors Decide gave for the column of set.
// A duplicate is the column's own, so it is prefixed with set; an
// *InvalidError says the same whatever the column, so it is listed once,
// the first time (seen holds those listed), unprefixed: the decisions show
// in which columns.
func appendColumnErrors(errs []error, set string, decideErrs []error, seen map[string]bool) []error {
	for _, e := range decideErrs {
		if _, ok := errors.AsType[*manifest.InvalidError](e); !ok {
			errs = append(errs, fmt.Errorf("%s: %w", set, e))
			continue
		}
		if !seen[e.Error()] {
			seen[e.Error()] = true
			errs = append(errs, e)
		}
	}
	return errs
}

// HasErrors reports whether WriteReport lists errors for r: load errors, or
// in some column a manifest decided invalid or two kept manifests for one
// object.
func HasErrors(r Report) bool {
	if len(r.LoadErrors) > 0 {
		return true
	}
	cols, err := reportColumns(r)
	if err != nil {
		return false
	}
	for _, col := range cols {
		c := r.Cluster
		c.Features = col
		if _, errs := manifest.Decide(r.Manifests, c); len(errs) > 0 {
			return true
		}
	}
	return false
}

func reportColumns(r Report) ([]manifest.Features, error) {
	if r.Cluster.Features != nil {
		return []manifest.Features{r.Cluster.Features}, nil
	}
	sets, err := reportFeatureSets(r.FeatureSets)
	if err != nil {
		return nil, err
	}
	cols := make([]manifest.Features, len(sets))
	for i, s := range sets {
		cols[i] = manifest.NewFeatures(s)
	}
	return cols, nil
}

type reportRow struct {
	m         manifest.Manifest
	decisions []manifest.Decision // one per column
}

func reportFeatureSets(featureSets []string) ([]string, error) {
	if len(featureSets) == 0 {
		return manifest.KnownFeatureSets(), nil
	}
	known := manifest.KnownFeatureSets()
	var sets []string
	for _, s := range featureSets {
		if s = strings.TrimSpace(s); s == "" {
			s = "Default" // the API spells it ""; annotations and reports "Default"
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("unknown feature set %q (known: %s)", s, strings.Join(known, ", "))
		}
		if !slices.Contains(sets, s) {
			sets = append(sets, s)
		}
	}
	return sets, nil
}

func writeTable(w io.Writer, rows []reportRow, errs []error, sets []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"FILE", "DOC", "KIND", "NAME"}
	for _, s := range sets {
		header = append(header, strings.ToUpper(s))
	}
	header = append(header, "REASON")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		name := r.m.Object.GetName()
		if ns := r.m.Object.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		cells := []string{r.m.File, fmt.Sprint(r.m.Index), r.m.Object.GetKind(), name}
		for _, d := range r.decisions {
			cells = append(cells, d.State())
		}
		cells = append(cells, tableReason(sets, r.decisions))
		// A tab inside a value would break the alignment.
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\n%d error(s):\n", len(errs))
		for _, e := range errs {
			if _, err := fmt.Fprintf(w, "  %v\n", e); err != nil {
				return fmt.Errorf("write report: %w", err)
			}
		}
	}
	return nil
}

// tableReason is the one reason when all feature sets agree, otherwise
// "Set: reason" for each set.
func tableReason(sets []string, ds []manifest.Decision) string {
	same := true
	for _, d := range ds[1:] {
		same = same && d.Reason == ds[0].Reason
	}
	if same {
		return ds[0].Reason
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = sets[i] + ": " + d.Reason
	}
	return strings.Join(parts, " | ")
}

type jsonReport struct {
	Profile     string         `json:"profile"`
	FeatureSets []string       `json:"featureSets"`
	Cluster     jsonCluster    `json:"cluster"`
	Manifests   []jsonManifest `json:"manifests"`
	Errors      []jsonError    `json:"errors"`
}

// jsonCluster is what of the cluster the decisions depended on besides the
// feature set and profile; null or empty means the filter was off.
type jsonCluster struct {
	Capabilities      *jsonCapabilities            `json:"capabilities"`
	MajorVersion      *uint64                      `json:"majorVersion"`
	ExcludeIdentifier string                       `json:"excludeIdentifier,omitempty"`
	Overrides         []configv1.ComponentOverride `json:"overrides,omitempty"`
}

type jsonCapabilities struct {
	Known   []configv1.ClusterVersionCapability `json:"knownCapabilities"`
	Enabled []configv1.ClusterVersionCapability `json:"enabledCapabilities"`
}

type jsonManifest struct {
	File      string                  `json:"file"`
	Index     int                     `json:"index"`
	Kind      string                  `json:"kind"`
	Name      string                  `json:"name"`
	Namespace string                  `json:"namespace,omitempty"`
	Decisions map[string]jsonDecision `json:"decisions"`
}

type jsonDecision struct {
	Included   bool   `json:"included"`
	Delete     bool   `json:"delete"`
	CreateOnly bool   `json:"createOnly"`
	Invalid    bool   `json:"invalid"`
	Reason     string `json:"reason"`
}

type jsonError struct {
	File  string `json:"file,omitempty"`
	Index *int   `json:"index,omitempty"`
	Error string `json:"error"`
}

func writeJSON(w io.Writer, rows []reportRow, errs []error, sets []string, c manifest.Cluster) error {
	out := jsonReport{Profile: c.Profile, FeatureSets: sets, Manifests: []jsonManifest{}, Errors: []jsonError{},
		Cluster: jsonCluster{MajorVersion: c.MajorVersion, ExcludeIdentifier: c.ExcludeIdentifier, Overrides: c.Overrides}}
	if c.Capabilities != nil {
		out.Cluster.Capabilities = &jsonCapabilities{
			Known:   append([]configv1.ClusterVersionCapability{}, c.Capabilities.Known...),
			Enabled: append([]configv1.ClusterVersionCapability{}, c.Capabilities.Enabled...),
		}
	}
	for _, r := range rows {
		jm := jsonManifest{
			File:      r.m.File,
			Index:     r.m.Index,
			Kind:      r.m.Object.GetKind(),
			Name:      r.m.Object.GetName(),
			Namespace: r.m.Object.GetNamespace(),
			Decisions: make(map[string]jsonDecision, len(sets)),
		}
		for i, d := range r.decisions {
			jm.Decisions[sets[i]] = jsonDecision(d)
		}
		out.Manifests = append(out.Manifests, jm)
	}
	for _, e := range errs {
		je := jsonError{Error: e.Error()}
		var (
			le  *manifest.LoadError
			dup *manifest.DuplicateError
			inv *manifest.InvalidError
		)
		switch {
		case errors.As(e, &le):
			je.File = le.File
			if le.Index >= 0 {
				je.Index = &le.Index
			}
		case errors.As(e, &dup):
			je.File = dup.Second.File
			je.Index = &dup.Second.Index
		case errors.As(e, &inv):
			je.File = inv.Manifest.File
			je.Index = &inv.Manifest.Index
		}
		out.Errors = append(out.Errors, je)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
