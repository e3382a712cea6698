package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFiles creates files (name → content) in a new temporary directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func manifestStrings(ms []Manifest) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out
}

func errorStrings(errs []error) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: default\n"
}

func TestLoadSeed(t *testing.T) {
	ms, errs := Load("testdata/seed")
	if len(errs) != 0 {
		t.Fatalf("Load(seed) errors: %v", errs)
	}
	want := []string{
		"0000_10_always_configmap.yaml[0] ConfigMap default/always",
		"0000_30_cluster-api_capi-operator_00_namespace.yaml[0] Namespace openshift-cluster-api",
		"0000_50_default-only_configmap.yaml[0] ConfigMap default/default-only",
	}
	if got := manifestStrings(ms); !reflect.DeepEqual(got, want) {
		t.Fatalf("Load(seed) = %q, want %q", got, want)
	}

	// The bug this package fixes: the namespace applies on tech preview.
	ns := ms[1].Object
	if d := Include(ns, Cluster{Features: NewFeatures(techPreviewSet), Profile: ha}); !d.Included {
		t.Errorf("seed namespace on TechPreviewNoUpgrade: %v, want included", d)
	}
	if d := Include(ns, Cluster{Features: NewFeatures(defaultSet)}); d.Included {
		t.Errorf("seed namespace on Default: %v, want excluded", d)
	}
	if d := Include(ms[2].Object, Cluster{Features: NewFeatures(techPreviewSet)}); d.Included {
		t.Errorf("default-only on TechPreviewNoUpgrade: %v, want excluded", d)
	}
	for _, set := range KnownFeatureSets() {
		if d := Include(ms[0].Object, Cluster{Features: NewFeatures(set), Profile: ha}); !d.Included {
			t.Errorf("always on %s: %v, want included", set, d)
		}
	}
}

func TestLoadBad(t *testing.T) {
	ms, errs := Load("testdata/bad")
	wantMs := []string{
		"0000_50_bad.yaml[0] ConfigMap default/good-before",
		"0000_50_bad.yaml[2] ConfigMap default/good-after",
		"0000_60_good_configmap.yaml[0] ConfigMap default/good",
	}
	if got := manifestStrings(ms); !reflect.DeepEqual(got, wantMs) {
		t.Errorf("manifests = %q, want %q", got, wantMs)
	}
	wantErrs := []struct{ file, prefix string }{
		{"0000_40_malformed.yaml", "0000_40_malformed.yaml[0]: parse YAML: "},
		{"0000_50_bad.yaml", "0000_50_bad.yaml[1]: missing metadata.name"},
	}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors = %q, want %d", errorStrings(errs), len(wantErrs))
	}
	for i, w := range wantErrs {
		var le *LoadError
		if !errors.As(errs[i], &le) || le.File != w.file {
			t.Errorf("error %d = %#v, want *LoadError for %s", i, errs[i], w.file)
		}
		if !strings.HasPrefix(errs[i].Error(), w.prefix) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w.prefix)
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // Manifest.String()
		errs  []string // substrings, one per error, in order
	}{
		{
			name: "sorted by file name, extensions, not recursive",
			files: map[string]string{
				"0000_50_b.yaml":       configMap("b"),
				"0000_10_a.yml":        configMap("a"),
				"0000_30_c.json":       `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`,
				"README.md":            configMap("readme"),
				"0000_20_x.yaml.orig":  configMap("orig"),
				"sub/0000_00_sub.yaml": configMap("sub"),
				"dir.yaml/x.yaml":      configMap("dirlike"),
			},
			want: []string{
				"0000_10_a.yml[0] ConfigMap default/a",
				"0000_30_c.json[0] ConfigMap default/c",
				"0000_50_b.yaml[0] ConfigMap default/b",
			},
		},
		{
			name: "multi-document and empty documents",
			files: map[string]string{
				"0000_10_multi.yaml": "---\n# header comment only\n---\n" + configMap("one") + "---\n\n---\n" +
					configMap("two") + "--- # trailing comment\nnull\n---\n" + configMap("three") + "---\n",
			},
			want: []string{
				"0000_10_multi.yaml[0] ConfigMap default/one",
				"0000_10_multi.yaml[1] ConfigMap default/two",
				"0000_10_multi.yaml[2] ConfigMap default/three",
			},
		},
		{
			name:  "empty file",
			files: map[string]string{"0000_10_empty.yaml": "", "0000_10_blank.json": "  \n"},
		},
		{
			name: "JSON stream, pretty and with tabs",
			files: map[string]string{
				"0000_10_s.json": "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"ConfigMap\",\n\t\"metadata\": {\"name\": \"j1\"}\n}\n" +
					`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j2"}}` + "\nnull\n" +
					`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j3"}}`,
			},
			want: []string{
				"0000_10_s.json[0] ConfigMap j1",
				"0000_10_s.json[1] ConfigMap j2",
				"0000_10_s.json[2] ConfigMap j3",
			},
		},
		{
			name: "JSON syntax error loses the rest of its file only",
			files: map[string]string{
				"0000_10_s.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j1"}}` + "\n{\"apiVersion\": oops}\n" +
					`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lost"}}`,
				"0000_20_ok.yaml": configMap("ok"),
			},
			want: []string{
				"0000_10_s.json[0] ConfigMap j1",
				"0000_20_ok.yaml[0] ConfigMap default/ok",
			},
			errs: []string{"0000_10_s.json[1]: parse JSON (rest of file skipped): "},
		},
		{
			name: "YAML in a .json file and JSON in a .yaml file",
			files: map[string]string{
				"0000_10_y.json": configMap("yaml-in-json"),
				"0000_10_j.yaml": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json-in-yaml"}}`,
			},
			want: []string{
				"0000_10_j.yaml[0] ConfigMap json-in-yaml",
				"0000_10_y.json[0] ConfigMap default/yaml-in-json",
			},
		},
		{
			name: "every kind of bad document, nothing else lost",
			files: map[string]string{
				"0000_10_bad.yaml": strings.Join([]string{
					"kind: ConfigMap\nmetadata:\n  name: no-api-version\n",
					"apiVersion: v1\nmetadata:\n  name: no-kind\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: default\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"\"\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 42\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata: just-a-string\n",
					"apiVersion: v1\nkind: ConfigMap\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: [a]\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    release.openshift.io/delete: true\n",
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations: [a]\n",
					"- a\n- list\n",
					"just a string\n",
					"key: [unclosed\n",
					configMap("survivor"),
				}, "---\n"),
				"0000_20_ok.yaml": configMap("ok"),
			},
			want: []string{
				"0000_10_bad.yaml[13] ConfigMap default/survivor",
				"0000_20_ok.yaml[0] ConfigMap default/ok",
			},
			errs: []string{
				"0000_10_bad.yaml[0]: missing apiVersion",
				"0000_10_bad.yaml[1]: missing kind",
				"0000_10_bad.yaml[2]: missing metadata.name",
				"0000_10_bad.yaml[3]: missing metadata.name",
				"0000_10_bad.yaml[4]: metadata.name is a number, not a string",
				"0000_10_bad.yaml[5]: missing metadata.name: ",
				"0000_10_bad.yaml[6]: missing metadata.name",
				"0000_10_bad.yaml[7]: metadata.namespace is a list, not a string",
				`0000_10_bad.yaml[8]: metadata.annotations["release.openshift.io/delete"] is a boolean, not a string`,
				"0000_10_bad.yaml[9]: metadata.annotations is a list, not an object",
				"0000_10_bad.yaml[10]: document is a list, not an object",
				"0000_10_bad.yaml[11]: document is a string, not an object",
				"0000_10_bad.yaml[12]: parse YAML: ",
			},
		},
		{
			name: "bad document separator",
			files: map[string]string{
				"0000_10_sep.yaml": configMap("first") + "--- not a comment\n" + configMap("second"),
			},
			want: []string{"0000_10_sep.yaml[1] ConfigMap default/second"},
			errs: []string{"0000_10_sep.yaml[0]: parse YAML: invalid Yaml document separator"},
		},
		{
			name:  "byte order mark",
			files: map[string]string{"0000_10_bom.yaml": "\xef\xbb\xbf" + configMap("bom")},
			want:  []string{"0000_10_bom.yaml[0] ConfigMap default/bom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, errs := Load(writeFiles(t, tt.files))
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if got := manifestStrings(ms); !reflect.DeepEqual(got, want) {
				t.Errorf("manifests:\n got %q\nwant %q", got, want)
			}
			got := errorStrings(errs)
			if len(got) != len(tt.errs) {
				t.Fatalf("errors:\n got %q\nwant %q", got, tt.errs)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.errs[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], tt.errs[i])
				}
				var le *LoadError
				if !errors.As(errs[i], &le) {
					t.Errorf("error %d is %T, want *LoadError", i, errs[i])
				}
			}
		})
	}
}

func TestLoadKeepsTypes(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"0000_10_d.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 3\n  ratio: 0.5\n",
	})
	ms, errs := Load(dir)
	if len(errs) != 0 || len(ms) != 1 {
		t.Fatalf("Load() = %v, %v", ms, errs)
	}
	spec := ms[0].Object.Object["spec"].(map[string]interface{})
	if _, ok := spec["replicas"].(int64); !ok {
		t.Errorf("replicas is %T, want int64", spec["replicas"])
	}
	if _, ok := spec["ratio"].(float64); !ok {
		t.Errorf("ratio is %T, want float64", spec["ratio"])
	}
	// Unstructured must be able to copy what Load returns.
	_ = ms[0].Object.DeepCopy()
}

func TestLoadMissingDir(t *testing.T) {
	ms, errs := Load(filepath.Join(t.TempDir(), "nope"))
	if len(ms) != 0 || len(errs) != 1 || !errors.Is(errs[0], os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, %v; want one not-exist error", ms, errs)
	}
	if !strings.Contains(errs[0].Error(), "nope") {
		t.Errorf("error %q does not name the directory", errs[0])
	}
}

func TestLoadUnreadableFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"0000_20_ok.yaml": configMap("ok")})
	// A dangling symlink cannot be read; it must be reported by name.
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "0000_10_link.yaml")); err != nil {
		t.Skip("symlinks not supported:", err)
	}
	ms, errs := Load(dir)
	if len(ms) != 1 || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "0000_10_link.yaml: ") {
		t.Fatalf("Load() = %q, %q", manifestStrings(ms), errorStrings(errs))
	}
	var le *LoadError
	if !errors.As(errs[0], &le) || le.Index != -1 {
		t.Errorf("error = %#v, want *LoadError with Index -1", errs[0])
	}
}

// One file may not define an object twice; the first definition is kept
// and the error names both documents.
func TestLoadDuplicateInFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"0000_10_a.yaml": configMap("x") + "---\n" + configMap("z") + "---\n" +
			// Same object under another apiVersion version: still the same object.
			"apiVersion: v1beta1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\n",
	})
	ms, errs := Load(dir)
	if got := manifestStrings(ms); !reflect.DeepEqual(got, []string{"0000_10_a.yaml[0] ConfigMap default/x", "0000_10_a.yaml[1] ConfigMap default/z"}) {
		t.Errorf("Load() = %q", got)
	}
	want := []string{"0000_10_a.yaml[2]: duplicate of 0000_10_a.yaml[0]: both are ConfigMap default/x"}
	if got := errorStrings(errs); !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %q, want %q", got, want)
	}
}

// Across files, the same object is loaded twice (a payload carries one file
// per feature set for one CRD); Duplicates reports it by both file names.
func TestDuplicates(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"0000_10_a.yaml": configMap("x"),
		"0000_20_b.yaml": configMap("z") + "---\n" + configMap("x"),
		"0000_30_c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: other\n" +
			"---\napiVersion: apps/v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\n",
	})
	ms, errs := Load(dir)
	if len(errs) != 0 || len(ms) != 5 {
		t.Fatalf("Load() = %v, %v", ms, errs)
	}
	dups := duplicates(ms)
	want := []string{"0000_10_a.yaml[0] and 0000_20_b.yaml[1] are both ConfigMap default/x"}
	if got := errorStrings(dups); !reflect.DeepEqual(got, want) {
		t.Errorf("Duplicates() = %q, want %q (namespace and group tell objects apart)", got, want)
	}
	var de *DuplicateError
	if !errors.As(dups[0], &de) || de.First.File != "0000_10_a.yaml" || de.Second.File != "0000_20_b.yaml" {
		t.Errorf("Duplicates()[0] = %#v", dups[0])
	}
	if dups := duplicates(nil); dups != nil {
		t.Errorf("Duplicates(nil) = %v", dups)
	}
}

// Decide checks duplicates among the manifests a cluster keeps only: per
// feature set variants of one object are fine.
func TestDecideDuplicates(t *testing.T) {
	variant := func(set string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\n  annotations:\n    release.openshift.io/feature-set: " + set + "\n"
	}
	dir := writeFiles(t, map[string]string{
		"0000_10_x-Default.yaml":              variant("Default"),
		"0000_10_x-TechPreviewNoUpgrade.yaml": variant("TechPreviewNoUpgrade"),
		"0000_10_x-both.yaml":                 variant("Default,OKD"),
	})
	ms, errs := Load(dir)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	ds, dups := Decide(ms, Cluster{Features: NewFeatures(techPreviewSet)})
	if len(dups) != 0 || len(ds) != 3 || ds[0].Included || !ds[1].Included || ds[2].Included {
		t.Errorf("TechPreviewNoUpgrade: %v, %v", ds, dups)
	}
	_, dups = Decide(ms, Cluster{})
	want := []string{"0000_10_x-Default.yaml[0] and 0000_10_x-both.yaml[0] are both ConfigMap default/x"}
	if got := errorStrings(dups); !reflect.DeepEqual(got, want) {
		t.Errorf("Default: duplicates = %q, want %q", got, want)
	}
}
