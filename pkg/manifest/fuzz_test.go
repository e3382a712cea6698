package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzInclude feeds arbitrary annotation values, feature set and profile to
// Include and checks that every Decision is well formed.
func FuzzInclude(f *testing.F) {
	f.Add("TechPreviewNoUpgrade", "", "", "", "TechPreviewNoUpgrade", "", "GateA")
	f.Add("", "Default", "", "", "Default", "", "")
	f.Add("GateA,-GateB", "Default , TechPreviewNoUpgrade", "true", "", "", "self-managed-high-availability", "GateA")
	f.Add("-", ",,", "True", "true", "OKD", "single-node-developer", "-")
	f.Add("TechPreviewNoUpgrade,GateA", "TechPreview", "", "false", "CustomNoUpgrade", "x", "TechPreviewNoUpgrade")
	f.Fuzz(func(t *testing.T, gate, set, profileValue, deleteValue, clusterSet, profile, enabled string) {
		annotations := map[string]string{}
		// Empty fuzzed values leave the annotation out, except for a
		// sentinel that keeps it present and empty.
		for key, v := range map[string]string{
			featureGateAnnotation:             gate,
			featureSetAnnotation:              set,
			profileAnnotationPrefix + profile: profileValue,
			deleteAnnotation:                  deleteValue,
		} {
			switch v {
			case "":
			case "<empty>":
				annotations[key] = ""
			default:
				annotations[key] = v
			}
		}
		obj := &unstructured.Unstructured{Object: map[string]interface{}{}}
		obj.SetAnnotations(annotations)
		features := fakeFeatures{set: clusterSet, gates: strings.Split(enabled, ",")}
		c := Cluster{Features: features, Profile: profile}
		d := Include(obj, c)
		checkDecision(t, d)
		if d.Delete && annotations[deleteAnnotation] != "true" {
			t.Errorf("delete without %s: %v", deleteAnnotation, d)
		}
		// Any other delete value is invalid once every rule includes.
		v, ok := annotations[deleteAnnotation]
		if badDelete := ok && v != "true"; d.Invalid != badDelete && (d.Invalid || d.Included) {
			t.Errorf("%s: %q (present %v): %v", deleteAnnotation, v, ok, d)
		}
		if profile != "" && d.Included && annotations[profileAnnotationPrefix+profile] != "true" {
			t.Errorf("included outside profile %q: %v", profile, d)
		}
		// A pure function: the same input decides the same way.
		if again := Include(obj, c); again != d {
			t.Errorf("Include is not deterministic: %v then %v", d, again)
		}
	})
}

// FuzzLoad feeds arbitrary file content to the loader's decoder and checks that whatever
// is loaded is identified and whatever fails names its file.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata/seed", "testdata/bad"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(data), false)
		}
	}
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}} {"kind":1}`, true)
	f.Add("---\n---\n# c\n--- x\nnull\n", false)
	f.Add("apiVersion: v1\nkind: A\nmetadata:\n  name: a\n  annotations: {a: 1}\n", false)
	f.Add("\xef\xbb\xbf[1, 2]\n---\n\"s\"\n---\n&a [*a]\n", false)
	f.Fuzz(func(t *testing.T, content string, asJSON bool) {
		name := "0000_10_fuzz.yaml"
		if asJSON {
			name = "0000_10_fuzz.json"
		}
		// The decoder, not the directory scan: Scan waits for a file younger
		// than its settle time, and a fuzz target that sleeps does not
		// search. TestLoad* cover the scan.
		ms, errs := decodeFile(name, []byte(content))
		last := -1
		for _, m := range ms {
			if m.File != name || m.Object == nil {
				t.Fatalf("manifest %v: want File %s and an object", m, name)
			}
			if m.Object.GetAPIVersion() == "" || m.Object.GetKind() == "" || m.Object.GetName() == "" {
				t.Errorf("manifest %v lacks apiVersion, kind or name", m)
			}
			if m.Index <= last {
				t.Errorf("manifest %v: index not increasing after %d", m, last)
			}
			last = m.Index
			_ = m.Object.DeepCopy() // panics on values Unstructured cannot hold
			checkDecision(t, Include(m.Object, Cluster{Features: NewFeatures(techPreviewSet)}))
		}
		for _, err := range errs {
			var le *LoadError
			if !errors.As(err, &le) || le.File != name || !strings.HasPrefix(err.Error(), name) {
				t.Errorf("error %q (%T) does not name %s", err, err, name)
			}
		}
	})
}
