package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

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

// auditCommand answers "which objects that this cluster's feature set
// includes are missing, which that it excludes are present, which that are
// to be deleted are still there?" for a live cluster or a must-gather. It
// exits 1 when it lists any, 0 when there are none, 2 on bad flags or input.
func auditCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("manifests-dir", "", "Directory of release manifests (required).")
	filters := bindFilterFlags(fs)
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // asked for: not bad input
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "audit:", err)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected arguments %q", fs.Args()))
	case *dir == "":
		return fail(errors.New("--manifests-dir is required"))
	case *output != "table" && *output != "json":
		return fail(fmt.Errorf("-o %q: want table or json", *output))
	case *fromCluster == (*mustGatherDir != ""):
		return fail(errors.New("exactly one of --from-cluster and --must-gather is required: they say where the cluster is read"))
	case *kubeconfig != "" && !*fromCluster:
		return fail(errors.New("--kubeconfig is only for --from-cluster"))
	}
	cluster, err := filters.cluster()
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
		c, err := clusterClient(*kubeconfig)
		if err != nil {
			return fail(fmt.Errorf("--from-cluster: %w", err))
		}
		where := "the cluster of the default kubeconfig"
		if *kubeconfig != "" {
			where = "the cluster of kubeconfig " + *kubeconfig
		}
		src, reader, sourceFlag = liveCluster{c: c, source: where}, c, "--from-cluster"
	} else {
		g, err := openMustGather(*mustGatherDir, ms)
		if err != nil {
			return fail(fmt.Errorf("--must-gather: %w", err))
		}
		src, reader, sourceFlag = g, g, "--must-gather"
	}
	features, inputs, err := readClusterFrom(reader, sourceFlag, *featureGateName, *filters.releaseVersion)
	if err != nil {
		return fail(err)
	}
	cluster.Features, cluster.Capabilities, cluster.Overrides = features, inputs.Capabilities, inputs.Overrides
	if err := withVersion(&cluster, features.Version()); err != nil {
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
	decideErrs, err := r.audit(context.Background(), ms, cluster, src)
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
type presence int

const (
	absent presence = iota
	present
	unknown
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

// mustGather is the output of `oc adm must-gather` or `oc adm inspect`: in
// its image directory, cluster-scoped objects under
// cluster-scoped-resources/<group>/ and namespaced ones under
// namespaces/<namespace>/<group>/ (the core group spelled "core"), each
// either in <resource>/<name>.yaml or as an item of <resource>.yaml, a
// List of every object of the resource there. An inspected namespace has
// its directory namespaces/<name>/.
//
// A resource with a list file was collected whole: an object not in it is
// absent. A resource without one was not collected, or only some of its
// objects (related objects are gathered by name): an object not found is
// unknown.
type mustGather struct {
	dir     string
	lists   map[string]map[string]json.RawMessage // list file -> name -> item
	plurals map[schema.GroupKind]string           // from the payload's CRDs
}

// openMustGather opens dir, the must-gather's root (with exactly one
// image directory in it) or its image directory.
func openMustGather(dir string, ms []manifest.Manifest) (*mustGather, error) {
	g := &mustGather{dir: dir, lists: map[string]map[string]json.RawMessage{}, plurals: crdPlurals(ms)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if fi, statErr := os.Stat(dir); statErr == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%s is a file, not a directory: extract the must-gather archive first", dir)
		}
		return nil, err
	}
	if isImageDir(dir) {
		return g, nil
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() && isImageDir(filepath.Join(dir, e.Name())) {
			found = append(found, e.Name())
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s: not a must-gather: no cluster-scoped-resources/ or namespaces/ in it nor in a directory in it", dir)
	case 1:
		g.dir = filepath.Join(dir, found[0])
		return g, nil
	default:
		return nil, fmt.Errorf("%s holds %d image directories (%s): pass the one of openshift/must-gather", dir, len(found), strings.Join(found, ", "))
	}
}

func isImageDir(dir string) bool {
	for _, sub := range []string{"cluster-scoped-resources", "namespaces"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
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

func (g *mustGather) where() string      { return "must-gather " + g.dir }
func (g *mustGather) unknownWhy() string { return "not collected" }

func (g *mustGather) resource(gk schema.GroupKind) string {
	if plural, ok := g.plurals[gk]; ok {
		return plural
	}
	plural, _ := meta.UnsafeGuessKindToResource(gk.WithVersion(""))
	return plural.Resource
}

// lookup finds an object: its data and the file it is in; when not found,
// whether the resource was collected whole (a list file) and the files
// that would have held it.
func (g *mustGather) lookup(group, resource, namespace, name string) (data []byte, file string, collected bool, tried []string, err error) {
	groupDir := group
	if groupDir == "" {
		groupDir = "core"
	}
	base := filepath.Join(g.dir, "cluster-scoped-resources", groupDir)
	if namespace != "" {
		base = filepath.Join(g.dir, "namespaces", namespace, groupDir)
	}
	own := filepath.Join(base, resource, name+".yaml")
	switch data, err := os.ReadFile(own); {
	case err == nil:
		return data, own, true, nil, nil
	case !errors.Is(err, iofs.ErrNotExist):
		return nil, own, false, nil, err
	}
	listFile := filepath.Join(base, resource+".yaml")
	items, err := g.list(listFile)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, "", false, []string{own, listFile}, nil
	case err != nil:
		return nil, listFile, false, nil, err
	}
	if item, ok := items[name]; ok {
		return item, listFile, true, nil, nil
	}
	return nil, "", true, []string{own, listFile}, nil
}

// list reads a list file once: a List (its items' missing apiVersion and
// kind are the list's) or a single object.
func (g *mustGather) list(path string) (map[string]json.RawMessage, error) {
	if items, ok := g.lists[path]; ok {
		return items, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	raw := l.Items
	itemKind, itemVersion := strings.TrimSuffix(l.Kind, "List"), l.APIVersion
	if !strings.HasSuffix(l.Kind, "List") {
		one, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		raw = []json.RawMessage{one}
	}
	items := map[string]json.RawMessage{}
	for i, item := range raw {
		var obj map[string]interface{}
		if err := json.Unmarshal(item, &obj); err != nil {
			return nil, fmt.Errorf("%s: items[%d]: %w", path, i, err)
		}
		u := unstructured.Unstructured{Object: obj}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: items[%d] has no metadata.name", path, i)
		}
		if u.GetKind() == "" && l.Kind != "List" {
			u.SetKind(itemKind)
			u.SetAPIVersion(itemVersion)
			if item, err = json.Marshal(obj); err != nil {
				return nil, fmt.Errorf("%s: items[%d]: %w", path, i, err)
			}
		}
		items[u.GetName()] = item
	}
	g.lists[path] = items
	return items, nil
}

// present reads the must-gather for obj. A Namespace exists when the
// must-gather inspected it (namespaces/<name>/) or holds it as a
// cluster-scoped object; otherwise it is absent.
func (g *mustGather) present(_ context.Context, obj *unstructured.Unstructured) (presence, string, error) {
	id := manifest.IDOf(obj)
	resource := g.resource(schema.GroupKind{Group: id.Group, Kind: id.Kind})
	isNamespace := id.Group == "" && id.Kind == "Namespace"
	nsDir := filepath.Join("namespaces", id.Name) + "/"
	if isNamespace {
		if fi, err := os.Stat(filepath.Join(g.dir, nsDir)); err == nil && fi.IsDir() {
			return present, nsDir, nil
		}
	}
	_, file, collected, tried, err := g.lookup(id.Group, resource, id.Namespace, id.Name)
	for i := range tried {
		tried[i] = g.rel(tried[i])
	}
	switch {
	case err != nil:
		return unknown, "", err
	case file != "":
		return present, g.rel(file), nil
	case isNamespace:
		return absent, fmt.Sprintf("no %s, %s nor %s", nsDir, tried[0], tried[1]), nil
	case collected:
		return absent, "not in " + tried[1], nil
	default:
		return unknown, fmt.Sprintf("not collected: no %s nor %s", tried[0], tried[1]), nil
	}
}

// rel is path within the image directory, for evidence.
func (g *mustGather) rel(path string) string {
	if r, err := filepath.Rel(g.dir, path); err == nil {
		return r
	}
	return path
}

// auditScheme maps the types readClusterFrom reads to their kinds.
var auditScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(configv1.Install(s))
	return s
}()

// Get reads a config.openshift.io object (the FeatureGate, the
// ClusterVersion) from the must-gather, decoded as the manifests command
// decodes such files; one that is not there is NotFound, as from a cluster.
func (g *mustGather) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, auditScheme)
	if err != nil {
		return err
	}
	resource := g.resource(gvk.GroupKind())
	data, file, _, tried, err := g.lookup(gvk.Group, resource, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	if file == "" {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Details: &metav1.StatusDetails{Group: gvk.Group, Kind: resource, Name: key.Name},
			Message: fmt.Sprintf("%s %s is in neither %s", gvk.Kind, key.Name, strings.Join(tried, " nor ")),
		}}
	}
	return decodeObject(file, data, gvk.Kind, obj)
}

// List is not needed: readClusterFrom and controllers.ReadInputs only Get.
func (g *mustGather) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("a must-gather is not listed")
}

var _ client.Reader = (*mustGather)(nil)
