// Package audit is the `manager audit` command: which objects that a
// cluster's feature set includes are missing, and which it excludes (or
// marks for deletion) are present, for a live cluster or a must-gather: what
// the seed's reporter did by hand.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/cmd/cmdline"
	"github.com/featuregate-operator/operator/internal/mustgather"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Audit states. An object is listed when its state is one of the first
// three; "unknown" is reported, never counted as a difference.
const (
	stateMissing         = "missing"
	stateExcludedPresent = "excluded-present"
	stateNotDeleted      = "not-deleted"
	stateUnknown         = "unknown"
)

// stateLabels are the listed states as the table spells them; the table
// counts the unknown ones in its summary.
var stateLabels = map[string]string{
	stateMissing:         "missing",
	stateExcludedPresent: "excluded but present",
	stateNotDeleted:      "not deleted",
}

// Run answers "which objects that this cluster's feature set
// includes are missing, which that it excludes are present, which that are
// to be deleted are still there?" for a live cluster or a must-gather. It
// exits 1 when it lists any, 0 when there are none, 2 on bad flags or input.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("manifests-dir", "", "Directory of release manifests (required).")
	filters := cmdline.BindFilterFlags(fs)
	mustGatherDir := fs.String("must-gather", "", "Read the cluster from `DIR`, the output of oc adm must-gather or oc adm inspect: its root or the image directory in it. Not with --from-cluster.")
	fromCluster := fs.Bool("from-cluster", false, "Read the live cluster the way the operator does (kubeconfig: --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster). Not with --must-gather.")
	kubeconfig := fs.String("kubeconfig", "", "With --from-cluster: the kubeconfig file.")
	featureGateName := fs.String("feature-gate-name", featuregate.Defaults().Name, "The FeatureGate to read.")
	output := fs.String("o", "table", "Output format: table or json.")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: manager audit --manifests-dir DIR (--must-gather DIR | --from-cluster [--kubeconfig FILE])\n"+
			"         [--release-version V] [--cluster-profile P] [--exclude-identifier ID] [--feature-gate-name NAME] [-o table|json]\n"+
			"Lists the manifests' objects that the cluster's feature set includes but that are missing, that it excludes\n"+
			"but that are present, and that are annotated release.openshift.io/delete: \"true\" but are present.\n"+
			"Objects a must-gather cannot tell about are counted as unknown. Exit 0: none listed; 1: some listed;\n"+
			"2: bad flags or input.\n")
		fs.PrintDefaults()
	}
	if exit, ok := cmdline.Parse(fs, args); !ok {
		return exit
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "audit:", err)
		return 2
	}
	switch {
	case *dir == "":
		return fail(errors.New("--manifests-dir is required"))
	case *output != "table" && *output != "json":
		return fail(fmt.Errorf("-o %q: want table or json", *output))
	case *fromCluster == (*mustGatherDir != ""):
		return fail(errors.New("exactly one of --from-cluster and --must-gather is required: they say where the cluster is read"))
	case *kubeconfig != "" && !*fromCluster:
		return fail(errors.New("--kubeconfig is only for --from-cluster"))
	}
	target, err := filters.Cluster()
	if err != nil {
		return fail(err)
	}
	if _, err := os.ReadDir(*dir); err != nil {
		return fail(fmt.Errorf("--manifests-dir: %w", err))
	}
	ms, loadErrs := manifest.Load(*dir)

	var (
		src        presenceSource
		reader     client.Reader
		sourceFlag string
	)
	if *fromCluster {
		c, err := cmdline.Client(*kubeconfig)
		if err != nil {
			return fail(fmt.Errorf("--from-cluster: %w", err))
		}
		where := "the cluster of the default kubeconfig"
		if *kubeconfig != "" {
			where = "the cluster of kubeconfig " + *kubeconfig
		}
		src, reader, sourceFlag = liveCluster{c: c, source: where}, c, "--from-cluster"
	} else {
		g, err := mustgather.Open(*mustGatherDir, mustgather.Options{Plurals: crdPlurals(ms)})
		if err != nil {
			return fail(fmt.Errorf("--must-gather: %w", err))
		}
		src, reader, sourceFlag = mustGatherSource{g}, mustgather.Reader{Gather: g, Scheme: auditScheme}, "--must-gather"
	}
	features, inputs, err := cmdline.ReadCluster(reader, sourceFlag, *featureGateName, *filters.ReleaseVersion)
	if err != nil {
		return fail(err)
	}
	target.Features, target.Capabilities, target.Overrides = features, inputs.Capabilities, inputs.Overrides
	if err := cmdline.SetMajorVersion(&target, features.Version()); err != nil {
		return fail(err)
	}

	r := auditReport{
		FeatureGate:      *featureGateName,
		FeatureSet:       features.FeatureSetName(),
		ReleaseVersion:   features.Version(),
		Source:           src.where(),
		unknownLabel:     src.unknownWhy(),
		CapabilityFilter: inputs.Filter(),
		Findings:         []auditFinding{},
		Errors:           []string{},
	}
	for _, e := range loadErrs {
		r.Errors = append(r.Errors, e.Error())
	}
	decideErrs, err := r.audit(context.Background(), ms, target, src)
	if err != nil {
		return fail(err)
	}
	for _, e := range decideErrs {
		r.Errors = append(r.Errors, e.Error())
	}
	if err := r.write(stdout, *output); err != nil {
		return fail(err)
	}
	switch {
	case len(r.Errors) > 0:
		for _, e := range r.Errors {
			fmt.Fprintln(stderr, "audit:", e)
		}
		return 2
	case r.Missing+r.ExcludedPresent+r.NotDeleted > 0:
		return 1
	default:
		return 0
	}
}

// auditReport is the result of an audit, and its -o json form.
type auditReport struct {
	FeatureGate      string `json:"featureGate"`
	FeatureSet       string `json:"featureSet"`
	ReleaseVersion   string `json:"releaseVersion"`
	Source           string `json:"source"`
	CapabilityFilter string `json:"capabilityFilter"`
	// Checked counts the objects whose presence was looked up.
	Checked         int `json:"checked"`
	Missing         int `json:"missing"`
	ExcludedPresent int `json:"excludedPresent"`
	NotDeleted      int `json:"notDeleted"`
	Unknown         int `json:"unknown"`
	// Findings are the listed and the unknown objects, in payload order.
	Findings []auditFinding `json:"findings"`
	// Errors are manifests that could not be read or decided.
	Errors []string `json:"errors"`

	unknownLabel string
}

type auditFinding struct {
	State     string `json:"state"`
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	File      string `json:"file"`
	Index     int    `json:"index"`
	// Decision and Why are the inclusion decision and its reason.
	Decision string `json:"decision"`
	Why      string `json:"why"`
	// Evidence says where presence was read, or why it could not be.
	Evidence string `json:"evidence"`
}

// presence is what a source knows of an object.
type presence = mustgather.Presence

const (
	absent  = mustgather.Absent
	present = mustgather.Present
	unknown = mustgather.Unknown
)

// presenceSource tells whether objects exist: a live cluster or a
// must-gather.
type presenceSource interface {
	present(ctx context.Context, obj *unstructured.Unstructured) (presence, string, error)
	// where names the source for the summary; unknownWhy says why an
	// object's presence can be unknown there.
	where() string
	unknownWhy() string
}

// audit decides every manifest for c and checks the presence of the
// objects that matter: those included (missing when absent), those to be
// deleted and those excluded (listed when present). An excluded manifest is
// not checked when another manifest keeps its object (payloads carry one
// file per feature set for some objects) nor when only spec.overrides or
// the exclude identifier exclude it (the object is someone else's then).
func (r *auditReport) audit(ctx context.Context, ms []manifest.Manifest, c manifest.Cluster, src presenceSource) ([]error, error) {
	ds, decideErrs := manifest.Decide(ms, c)
	kept := map[manifest.ObjectID]bool{}
	for i, d := range ds {
		if d.Included || d.Delete {
			kept[manifest.IDOf(ms[i].Object)] = true
		}
	}
	seen := map[manifest.ObjectID]bool{}
	for i, m := range ms {
		d, id := ds[i], manifest.IDOf(m.Object)
		if d.Invalid {
			continue // an error already
		}
		if excluded := !d.Included && !d.Delete; excluded && (kept[id] || seen[id] || managedElsewhere(m, c)) {
			continue
		}
		seen[id] = true
		p, evidence, err := src.present(ctx, m.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		r.Checked++
		var state string
		switch {
		case p == unknown:
			state = stateUnknown
			r.Unknown++
		case d.Included && p == absent:
			state = stateMissing
			r.Missing++
		case d.Delete && p == present:
			state = stateNotDeleted
			r.NotDeleted++
		case !d.Included && !d.Delete && p == present:
			state = stateExcludedPresent
			r.ExcludedPresent++
		default:
			continue
		}
		r.Findings = append(r.Findings, auditFinding{
			State: state, Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name,
			File: m.File, Index: m.Index, Decision: d.State(), Why: d.Reason, Evidence: evidence,
		})
	}
	return decideErrs, nil
}

// managedElsewhere reports whether only spec.overrides or the exclude
// identifier exclude m's object: it is unmanaged, or managed by another
// party, and its presence says nothing.
func managedElsewhere(m manifest.Manifest, c manifest.Cluster) bool {
	if len(c.Overrides) == 0 && c.ExcludeIdentifier == "" {
		return false
	}
	c.Overrides, c.ExcludeIdentifier = nil, ""
	d := manifest.Include(m.Object, c)
	return d.Included || d.Delete
}

func (r *auditReport) write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	}
	unknownKinds := map[string]int{}
	var kinds []string
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, f := range r.Findings {
		if f.State == stateUnknown {
			k := f.Kind
			if f.Group != "" {
				k += "." + f.Group
			}
			if unknownKinds[k] == 0 {
				kinds = append(kinds, k)
			}
			unknownKinds[k]++
			continue
		}
		if !header {
			fmt.Fprintln(tw, "STATE\tKIND\tNAMESPACE/NAME\tFILE\tWHY")
			header = true
		}
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + name
		}
		cells := []string{stateLabels[f.State], f.Kind, name, f.File, f.Why}
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	version := "no release version: spec only"
	if r.ReleaseVersion != "" {
		version = "release " + r.ReleaseVersion
	}
	unknownText := ""
	if r.Unknown > 0 {
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, unknownKinds[k]))
		}
		unknownText = " (" + r.unknownLabel + ": " + strings.Join(parts, ", ") + ")"
	}
	_, err := fmt.Fprintf(w, "Feature set %s (FeatureGate %s, %s) read from %s; capability filter %s. %d objects checked: %d missing, %d excluded but present, %d not deleted, %d unknown%s.\n",
		r.FeatureSet, r.FeatureGate, version, r.Source, r.CapabilityFilter, r.Checked, r.Missing, r.ExcludedPresent, r.NotDeleted, r.Unknown, unknownText)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// liveCluster is a cluster read through a client whose REST mapper asks
// discovery.
type liveCluster struct {
	c      client.Client
	source string
}

func (l liveCluster) where() string      { return l.source }
func (l liveCluster) unknownWhy() string { return "GET forbidden" }

// present GETs obj by group and kind, in the version the server prefers:
// the version of a manifest's apiVersion does not matter, as for the
// cluster-version-operator. A kind the server does not serve has no
// objects; a GET the server forbids is unknown.
func (l liveCluster) present(ctx context.Context, obj *unstructured.Unstructured) (presence, string, error) {
	gk := obj.GroupVersionKind().GroupKind()
	mapping, err := l.c.RESTMapper().RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return absent, fmt.Sprintf("kind %s is not served", gk), nil
	}
	if err != nil {
		return unknown, "", fmt.Errorf("map kind %s: %w", gk, err)
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		key.Namespace = ""
	} else if key.Namespace == "" {
		return unknown, "", fmt.Errorf("namespaced kind %s without metadata.namespace", gk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	path := mapping.Resource.Resource + " " + key.String()
	switch err := l.c.Get(ctx, key, u); {
	case err == nil:
		return present, "GET " + path, nil
	case apierrors.IsNotFound(err):
		return absent, "GET " + path + ": not found", nil
	case apierrors.IsForbidden(err):
		return unknown, "GET " + path + ": forbidden", nil
	default:
		return unknown, "", fmt.Errorf("GET %s: %w", path, err)
	}
}

// crdPlurals maps the kinds the payload's CustomResourceDefinitions define
// to their resource names; other kinds are guessed, as kubectl does.
func crdPlurals(ms []manifest.Manifest) map[schema.GroupKind]string {
	out := map[schema.GroupKind]string{}
	for _, m := range ms {
		if m.Object.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(m.Object.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(m.Object.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(m.Object.Object, "spec", "names", "plural")
		if kind != "" && plural != "" {
			out[schema.GroupKind{Group: group, Kind: kind}] = plural
		}
	}
	return out
}

// mustGatherSource is a must-gather as the audit reads it.
type mustGatherSource struct{ *mustgather.Gather }

func (g mustGatherSource) where() string      { return g.Where() }
func (g mustGatherSource) unknownWhy() string { return "not collected" }
func (g mustGatherSource) present(_ context.Context, obj *unstructured.Unstructured) (presence, string, error) {
	return g.Present(obj)
}

// auditScheme maps the types cmdline.ReadCluster reads to their kinds.
var auditScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(configv1.Install(s))
	return s
}()
