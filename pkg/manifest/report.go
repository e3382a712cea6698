package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WriteReport writes, for each manifest, the decision of Include in each of
// featureSets under profile, then the load errors. It is the offline view of
// a payload: there is no cluster to ask, so feature gate lists are evaluated
// with no gate enabled (FeatureSetOnly). An empty featureSets means all of
// KnownFeatureSets; an unknown name is an error, as it would silently
// exclude everything annotated.
//
// format "" or "table" is an aligned text table with one column per feature
// set and the reasons last; "json" is a single JSON object
// {"profile", "featureSets", "manifests": [...], "errors": [...]}.
// Load errors do not make WriteReport fail; the caller decides the exit code.
func WriteReport(w io.Writer, ms []Manifest, loadErrs []error, featureSets []string, profile string, format string) error {
	sets, err := reportFeatureSets(featureSets)
	if err != nil {
		return err
	}
	rows := make([]reportRow, 0, len(ms))
	for _, m := range ms {
		if m.Object == nil { // not from Load; report it rather than panic
			m.Object = &unstructured.Unstructured{Object: map[string]interface{}{}}
		}
		row := reportRow{m: m, decisions: make([]Decision, len(sets))}
		for i, set := range sets {
			row.decisions[i] = Include(m.Object, FeatureSetOnly(set), profile)
		}
		rows = append(rows, row)
	}
	switch format {
	case "", "table":
		return writeTable(w, rows, loadErrs, sets)
	case "json":
		return writeJSON(w, rows, loadErrs, sets, profile)
	default:
		return fmt.Errorf("unknown report format %q (want table or json)", format)
	}
}

type reportRow struct {
	m         Manifest
	decisions []Decision // one per feature set
}

func reportFeatureSets(featureSets []string) ([]string, error) {
	if len(featureSets) == 0 {
		return KnownFeatureSets(), nil
	}
	var sets []string
	for _, s := range featureSets {
		s = normalizeFeatureSet(strings.TrimSpace(s))
		if !isKnownFeatureSet(s) {
			return nil, fmt.Errorf("unknown feature set %q (known: %s)", s, strings.Join(knownFeatureSets, ", "))
		}
		if !slices.Contains(sets, s) {
			sets = append(sets, s)
		}
	}
	return sets, nil
}

func writeTable(w io.Writer, rows []reportRow, loadErrs []error, sets []string) error {
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
	if len(loadErrs) > 0 {
		fmt.Fprintf(w, "\n%d load error(s):\n", len(loadErrs))
		for _, e := range loadErrs {
			if _, err := fmt.Fprintf(w, "  %v\n", e); err != nil {
				return fmt.Errorf("write report: %w", err)
			}
		}
	}
	return nil
}

// tableReason is the one reason when all feature sets agree, otherwise
// "Set: reason" for each set.
func tableReason(sets []string, ds []Decision) string {
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
	Manifests   []jsonManifest `json:"manifests"`
	Errors      []jsonError    `json:"errors"`
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
	Included bool   `json:"included"`
	Skipped  bool   `json:"skipped"`
	Reason   string `json:"reason"`
}

type jsonError struct {
	File  string `json:"file,omitempty"`
	Index *int   `json:"index,omitempty"`
	Error string `json:"error"`
}

func writeJSON(w io.Writer, rows []reportRow, loadErrs []error, sets []string, profile string) error {
	out := jsonReport{Profile: profile, FeatureSets: sets, Manifests: []jsonManifest{}, Errors: []jsonError{}}
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
	for _, e := range loadErrs {
		je := jsonError{Error: e.Error()}
		var le *LoadError
		if errors.As(e, &le) {
			je.File = le.File
			if le.Index >= 0 {
				je.Index = &le.Index
			}
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
