package manifest

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

var (
	apiDirOnce sync.Once
	apiDir     string
	apiDirErr  error
)

// openshiftAPIDir is the pinned github.com/openshift/api module directory,
// whose payload-manifests are real release payload input.
func openshiftAPIDir(t *testing.T) string {
	t.Helper()
	apiDirOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
		apiDir, apiDirErr = strings.TrimSpace(string(out)), err
		if err == nil && apiDir == "" {
			apiDirErr = fmt.Errorf("go list printed no directory")
		}
	})
	if apiDirErr != nil {
		t.Fatalf("locate github.com/openshift/api: %v", apiDirErr)
	}
	return apiDir
}

// parityCase is one entry of testdata/parity/cases.json: a manifest
// directory and a cluster, the same input the library-go side was given.
type parityCase struct {
	Name              string                                     `json:"name"`
	Manifests         string                                     `json:"manifests"`
	FeatureGate       string                                     `json:"featureGate"`
	FeatureSet        string                                     `json:"featureSet"`
	EnabledGates      []configv1.FeatureGateName                 `json:"enabledGates"`
	Profile           string                                     `json:"profile"`
	Capabilities      *configv1.ClusterVersionCapabilitiesStatus `json:"capabilities"`
	MajorVersion      *uint64                                    `json:"majorVersion"`
	ExcludeIdentifier string                                     `json:"excludeIdentifier"`
	Overrides         []configv1.ComponentOverride               `json:"overrides"`
}

type libraryGoDecision struct {
	File      string `json:"file"`
	Index     int    `json:"index"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Included  bool   `json:"included"`
	Reason    string `json:"reason"`
}

func (c parityCase) path(t *testing.T, p string) string {
	if rest, ok := strings.CutPrefix(p, "$OPENSHIFT_API/"); ok {
		return filepath.Join(openshiftAPIDir(t), rest)
	}
	return filepath.Join("testdata", "parity", p)
}

func readFeatureGate(t *testing.T, path string) *configv1.FeatureGate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fg := &configv1.FeatureGate{}
	if err := yaml.UnmarshalStrict(data, fg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fg
}

// payloadFeatures reads a payload FeatureGate file as the operator reads the
// live object. The files are templates: their one status entry has no
// version yet, and stands for the release's.
func payloadFeatures(t *testing.T, fg *configv1.FeatureGate) featuregate.Snapshot {
	t.Helper()
	if len(fg.Status.FeatureGates) != 1 {
		t.Fatalf("FeatureGate %s: %d status.featureGates entries, want the template's one", fg.Name, len(fg.Status.FeatureGates))
	}
	fg = fg.DeepCopy()
	fg.Status.FeatureGates[0].Version = "payload"
	s, err := featuregate.Read(fg, "payload")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (c parityCase) cluster(t *testing.T) Cluster {
	t.Helper()
	cl := Cluster{
		Features:          NewFeatures(c.FeatureSet, c.EnabledGates...),
		Profile:           c.Profile,
		MajorVersion:      c.MajorVersion,
		ExcludeIdentifier: c.ExcludeIdentifier,
		Overrides:         c.Overrides,
	}
	if c.FeatureGate != "" {
		cl.Features = payloadFeatures(t, readFeatureGate(t, c.path(t, c.FeatureGate)))
	}
	if c.Capabilities != nil {
		cl.Capabilities = &Capabilities{Known: c.Capabilities.KnownCapabilities, Enabled: c.Capabilities.EnabledCapabilities}
	}
	return cl
}

// libraryGoDifference says why the project may decide otherwise than
// library-go for a manifest, or "" when it may not. These are the
// differences docs/manifests.md documents.
func libraryGoDifference(m Manifest, c Cluster) string {
	annotations := m.Object.GetAnnotations()
	_, hasFS := annotations[featureSetAnnotation]
	if v, ok := annotations[featureGateAnnotation]; ok && !hasFS && isOldFeatureSetSpelling(v) {
		return "4.10 spelling"
	}
	if annotations == nil && c.Profile == "" {
		return "no annotations"
	}
	return ""
}

// TestLibraryGoParity compares Include with the decisions openshift/library-go
// made for the same inputs (testdata/parity/library-go.json, computed outside
// this module: see docs/manifests.md). Every difference must be a documented one,
// and each documented one must show up.
func TestLibraryGoParity(t *testing.T) {
	var cases []parityCase
	readJSON(t, "testdata/parity/cases.json", &cases)
	var golden struct {
		Results []struct {
			Name      string              `json:"name"`
			Decisions []libraryGoDecision `json:"decisions"`
		} `json:"results"`
	}
	readJSON(t, "testdata/parity/library-go.json", &golden)
	if len(golden.Results) != len(cases) {
		t.Fatalf("library-go.json has %d results for %d cases: regenerate it", len(golden.Results), len(cases))
	}
	differences := map[string]int{}
	compared := 0
	for i, c := range cases {
		want := golden.Results[i]
		t.Run(c.Name, func(t *testing.T) {
			if want.Name != c.Name {
				t.Fatalf("library-go.json result %d is %q, want %q: regenerate it", i, want.Name, c.Name)
			}
			ms, errs := Load(c.path(t, c.Manifests))
			if len(errs) != 0 {
				t.Fatalf("Load: %v", errs)
			}
			if len(ms) != len(want.Decisions) {
				t.Fatalf("loaded %d manifests, library-go %d", len(ms), len(want.Decisions))
			}
			cl := c.cluster(t)
			for j, m := range ms {
				lg := want.Decisions[j]
				id := IDOf(m.Object)
				if m.File != lg.File || m.Index != lg.Index || id.Kind != lg.Kind || id.Name != lg.Name || id.Namespace != lg.Namespace {
					t.Fatalf("manifest %d is %s, library-go's %s[%d] %s %s/%s", j, m, lg.File, lg.Index, lg.Kind, lg.Namespace, lg.Name)
				}
				d := Include(m.Object, cl)
				checkDecision(t, d)
				compared++
				// An invalid manifest is one library-go includes; the
				// cluster-version-operator refuses it only at apply.
				if got := d.Included || d.Delete || d.Invalid; got != lg.Included {
					why := libraryGoDifference(m, cl)
					if why == "" {
						t.Errorf("%s: project %v; library-go included=%v %s", m, d, lg.Included, lg.Reason)
						continue
					}
					differences[why]++
				}
			}
		})
	}
	for _, why := range []string{"4.10 spelling", "no annotations"} {
		if differences[why] == 0 {
			t.Errorf("documented difference %q never showed: the cases no longer pin it", why)
		}
	}
	t.Logf("%d decisions compared; documented differences: %v", compared, differences)
}

// TestCVOAnnotationParity runs the cluster-version-operator's own reading of
// release.openshift.io/delete and release.openshift.io/create-only against
// Include. The delete rows are those of the CVO's TestValidDeleteAnnotation
// (lib/resourcedelete/helper_test.go) and more; ValidDeleteAnnotation
// (lib/resourcedelete/helper.go) returns an error for any value but "true",
// and the builders then neither delete nor apply. The create-only rows follow
// IsCreateOnly (lib/resourceapply/interface.go), strings.EqualFold with
// "true"; the generic builder (pkg/cvo/internal/generic.go Do) looks at delete
// first, so an invalid delete value wins over create-only.
func TestCVOAnnotationParity(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		// cvoDelete and cvoErr are ValidDeleteAnnotation's results;
		// cvoCreateOnly is IsCreateOnly's.
		cvoDelete, cvoErr, cvoCreateOnly bool
	}{
		{name: "no delete annotation", annotations: map[string]string{"foo": "bar"}},
		{name: "no annotations"},
		{name: "valid delete annotation", annotations: map[string]string{deleteAnnotation: "true"}, cvoDelete: true},
		{name: "invalid delete annotation", annotations: map[string]string{deleteAnnotation: "false"}, cvoDelete: true, cvoErr: true},
		{name: "delete True", annotations: map[string]string{deleteAnnotation: "True"}, cvoDelete: true, cvoErr: true},
		{name: "delete empty", annotations: map[string]string{deleteAnnotation: ""}, cvoDelete: true, cvoErr: true},
		{name: "delete yes", annotations: map[string]string{deleteAnnotation: "yes"}, cvoDelete: true, cvoErr: true},
		{name: "create-only true", annotations: map[string]string{createOnlyAnnotation: "true"}, cvoCreateOnly: true},
		{name: "create-only True", annotations: map[string]string{createOnlyAnnotation: "True"}, cvoCreateOnly: true},
		{name: "create-only TRUE", annotations: map[string]string{createOnlyAnnotation: "TRUE"}, cvoCreateOnly: true},
		{name: "create-only false", annotations: map[string]string{createOnlyAnnotation: "false"}},
		{name: "create-only empty", annotations: map[string]string{createOnlyAnnotation: ""}},
		{name: "create-only 1", annotations: map[string]string{createOnlyAnnotation: "1"}},
		{name: "invalid delete and create-only", annotations: map[string]string{deleteAnnotation: "false", createOnlyAnnotation: "true"}, cvoDelete: true, cvoErr: true, cvoCreateOnly: true},
		{name: "delete and create-only", annotations: map[string]string{deleteAnnotation: "true", createOnlyAnnotation: "True"}, cvoDelete: true, cvoCreateOnly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Include(object("", tt.annotations), Cluster{})
			checkDecision(t, d)
			var want string
			switch {
			case tt.cvoErr:
				want = "invalid"
			case tt.cvoDelete:
				want = "delete"
			case tt.cvoCreateOnly:
				want = "create-only"
			default:
				want = "included"
			}
			if got := d.State(); got != want {
				t.Errorf("Include() = %v, want %s as the cluster-version-operator", d, want)
			}
		})
	}
}

func readJSON(t *testing.T, path string, v interface{}) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestPayloadInclusion pins what Include keeps of the pinned openshift/api's
// payload CRDs under each of its payload FeatureGate files (feature set and
// gates of the file's status entry; profile from its include annotation;
// major version 4), so that an openshift/api bump shows as a diff of
// testdata/payload-included.golden. Regenerate with -update.
func TestPayloadInclusion(t *testing.T) {
	api := openshiftAPIDir(t)
	ms, errs := Load(filepath.Join(api, "payload-manifests", "crds"))
	if len(errs) != 0 {
		t.Fatalf("Load: %v", errs)
	}
	files, err := filepath.Glob(filepath.Join(api, "payload-manifests", "featuregates", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no payload FeatureGate files: %v", err)
	}
	slices.Sort(files)
	var b strings.Builder
	fmt.Fprintf(&b, "# Included of openshift/api payload-manifests/crds (%d manifests), by payload FeatureGate file.\n", len(ms))
	four := uint64(4)
	for _, file := range files {
		fg := readFeatureGate(t, file)
		profile := ""
		for k := range fg.Annotations {
			if p, ok := strings.CutPrefix(k, profileAnnotationPrefix); ok {
				if profile != "" {
					t.Fatalf("%s: two profiles %s and %s", file, profile, p)
				}
				profile = p
			}
		}
		c := Cluster{Features: payloadFeatures(t, fg), Profile: profile, MajorVersion: &four}
		ds, errs := Decide(ms, c)
		if len(errs) != 0 {
			t.Errorf("%s: %v", filepath.Base(file), errs)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		var kept []string
		for i, d := range ds {
			if d.Included || d.Delete {
				kept = append(kept, fmt.Sprintf("%s %s %s", name, d.State(), ms[i].File))
			}
		}
		if len(kept) == 0 {
			t.Errorf("%s: nothing included", name)
		}
		fmt.Fprintf(&b, "\n%s: feature set %s, profile %s, %d included\n%s\n", name, c.Features.FeatureSetName(), profile, len(kept), strings.Join(kept, "\n"))
	}
	golden := filepath.Join("testdata", "payload-included.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestPayloadInclusion -update)", err)
	}
	if string(want) != b.String() {
		t.Errorf("included set differs from %s (if openshift/api changed on purpose, rerun with -update and review the diff):\n%s",
			golden, lineDiff(string(want), b.String()))
	}
}

// lineDiff lists the lines only in want (-) or only in got (+).
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			out = append(out, "+ "+l)
		}
	}
	if len(out) == 0 {
		return "(same lines, other order or count)"
	}
	return strings.Join(out, "\n")
}
