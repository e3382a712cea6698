package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// reportInput is the seed payload plus a load error and a delete manifest.
func reportInput(t *testing.T) ([]manifest.Manifest, []error) {
	t.Helper()
	ms, errs := manifest.Load(seedDir)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	dir := writeFiles(t, map[string]string{
		"0000_90_gone.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n  namespace: default\n  annotations:\n    release.openshift.io/delete: \"true\"\n",
		"0000_95_bad.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
	})
	more, errs := manifest.Load(dir)
	return append(ms, more...), errs
}

// tableRows splits table output into rows of whitespace-separated fields,
// so that assertions do not depend on column widths.
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestWriteReportTable(t *testing.T) {
	ms, errs := reportInput(t)
	var buf bytes.Buffer
	if err := WriteReport(&buf, Report{Manifests: ms, LoadErrors: errs}, ""); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	rows := tableRows(out)
	wantHeader := []string{"FILE", "DOC", "KIND", "NAME", "DEFAULT", "TECHPREVIEWNOUPGRADE", "DEVPREVIEWNOUPGRADE", "OKD", "CUSTOMNOUPGRADE", "REASON"}
	if got := rows[0]; strings.Join(got, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("header = %q, want %q", got, wantHeader)
	}
	want := [][]string{
		{"0000_10_always_configmap.yaml", "0", "ConfigMap", "default/always", "included", "included", "included", "included", "included"},
		{"0000_30_cluster-api_capi-operator_00_namespace.yaml", "0", "Namespace", "openshift-cluster-api", "excluded", "included", "excluded", "excluded", "excluded"},
		{"0000_50_default-only_configmap.yaml", "0", "ConfigMap", "default/default-only", "included", "excluded", "excluded", "excluded", "excluded"},
		{"0000_90_gone.yaml", "0", "ConfigMap", "default/gone", "delete", "delete", "delete", "delete", "delete"},
	}
	for i, w := range want {
		got := rows[i+1]
		if len(got) < len(w) || strings.Join(got[:len(w)], " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %q, want prefix %q", i+1, got, w)
		}
	}
	for _, s := range []string{
		"no release.openshift.io/feature-set or release.openshift.io/feature-gate annotation",
		`TechPreviewNoUpgrade: release.openshift.io/feature-gate: "TechPreviewNoUpgrade" includes feature set TechPreviewNoUpgrade`,
		`release.openshift.io/delete: "true"`,
		"1 error(s):\n  0000_95_bad.yaml[0]: missing metadata.name\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("report does not contain %q:\n%s", s, out)
		}
	}
}

func TestWriteReportTableOneSet(t *testing.T) {
	ms, _ := reportInput(t)
	var buf bytes.Buffer
	if err := WriteReport(&buf, Report{Manifests: ms, FeatureSets: []string{"TechPreviewNoUpgrade"}, Cluster: manifest.Cluster{Profile: "self-managed-high-availability"}}, "table"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	rows := tableRows(out)
	if got := strings.Join(rows[0], " "); got != "FILE DOC KIND NAME TECHPREVIEWNOUPGRADE REASON" {
		t.Errorf("header = %q", got)
	}
	// With one set the reason is that set's only, without a set prefix.
	ns := strings.Join(rows[2], " ")
	wantNS := `0000_30_cluster-api_capi-operator_00_namespace.yaml 0 Namespace openshift-cluster-api included release.openshift.io/feature-gate: "TechPreviewNoUpgrade" includes feature set TechPreviewNoUpgrade (4.10 spelling of release.openshift.io/feature-set); include.release.openshift.io/self-managed-high-availability: "true"`
	if ns != wantNS {
		t.Errorf("namespace row = %q, want %q", ns, wantNS)
	}
	// The delete manifest has no profile annotation: the profile excludes it first.
	if gone := strings.Join(rows[4], " "); !strings.HasPrefix(gone, "0000_90_gone.yaml 0 ConfigMap default/gone excluded include.release.openshift.io/self-managed-high-availability is not set") {
		t.Errorf("delete row = %q", gone)
	}
	if strings.Contains(out, "error(s)") {
		t.Errorf("report without load errors mentions them:\n%s", out)
	}
}

func TestWriteReportJSON(t *testing.T) {
	ms, errs := reportInput(t)
	var buf bytes.Buffer
	if err := WriteReport(&buf, Report{Manifests: ms, LoadErrors: errs, FeatureSets: []string{"", "TechPreviewNoUpgrade", "Default"}}, "json"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Profile     string
		FeatureSets []string
		Manifests   []struct {
			File, Kind, Name, Namespace string
			Index                       int
			Decisions                   map[string]struct {
				Included, Delete bool
				Reason           string
			}
		}
		Errors []struct {
			File, Error string
			Index       *int
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, buf.String())
	}
	if strings.Join(got.FeatureSets, ",") != "Default,TechPreviewNoUpgrade" {
		t.Errorf("featureSets = %q, want Default,TechPreviewNoUpgrade (normalized, deduplicated)", got.FeatureSets)
	}
	if len(got.Manifests) != 4 {
		t.Fatalf("manifests = %+v, want 4", got.Manifests)
	}
	ns := got.Manifests[1]
	if ns.File != "0000_30_cluster-api_capi-operator_00_namespace.yaml" || ns.Index != 0 || ns.Kind != "Namespace" || ns.Name != "openshift-cluster-api" || ns.Namespace != "" {
		t.Errorf("namespace = %+v", ns)
	}
	if d := ns.Decisions["TechPreviewNoUpgrade"]; !d.Included || d.Delete || !strings.Contains(d.Reason, "release.openshift.io/feature-gate") {
		t.Errorf("namespace on TechPreviewNoUpgrade = %+v", d)
	}
	if d := ns.Decisions["Default"]; d.Included || d.Delete || d.Reason == "" {
		t.Errorf("namespace on Default = %+v", d)
	}
	if got.Manifests[0].Namespace != "default" {
		t.Errorf("always namespace = %q", got.Manifests[0].Namespace)
	}
	if d := got.Manifests[3].Decisions["Default"]; d.Included || !d.Delete {
		t.Errorf("delete manifest = %+v, want delete", d)
	}
	if len(got.Errors) != 1 || got.Errors[0].File != "0000_95_bad.yaml" || got.Errors[0].Index == nil || *got.Errors[0].Index != 0 ||
		!strings.Contains(got.Errors[0].Error, "missing metadata.name") {
		t.Errorf("errors = %+v", got.Errors)
	}
}

func TestWriteReportJSONEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteReport(&buf, Report{}, "json"); err != nil {
		t.Fatal(err)
	}
	// Empty lists, not null, so that jq and friends need no special case.
	for _, s := range []string{`"manifests": []`, `"errors": []`} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("report does not contain %s:\n%s", s, buf.String())
		}
	}
}

func TestWriteReportErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteReport(&buf, Report{}, "yaml"); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("unknown format: err = %v, want one naming it", err)
	}
	if err := WriteReport(&buf, Report{FeatureSets: []string{"TechPreview"}}, ""); err == nil || !strings.Contains(err.Error(), `"TechPreview"`) {
		t.Errorf("unknown feature set: err = %v, want one naming it", err)
	}
}

// invalidInput is pkg/manifest's payload with manifests the
// cluster-version-operator refuses: one everywhere, one only where
// TechPreviewNoUpgrade includes it.
func invalidInput(t *testing.T) []manifest.Manifest {
	t.Helper()
	ms, errs := manifest.Load("../../../pkg/manifest/testdata/invalid")
	if len(errs) != 0 || len(ms) != 4 {
		t.Fatalf("Load() = %v, %v", ms, errs)
	}
	return ms
}

// The report lists each invalid manifest once however many columns refuse
// it, shows the state "invalid", and HasErrors is true.
func TestWriteReportInvalid(t *testing.T) {
	ms := invalidInput(t)
	r := Report{Manifests: ms}
	var buf bytes.Buffer
	if err := WriteReport(&buf, r, ""); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	rows := tableRows(out)
	for i, w := range [][]string{
		{"0000_20_bad.yaml", "1", "ConfigMap", "default/kept", "invalid", "invalid", "invalid", "invalid", "invalid"},
		{"0000_30_tp.yaml", "0", "ConfigMap", "default/tp", "excluded", "invalid", "excluded", "excluded", "excluded"},
	} {
		if got := rows[i+3]; len(got) < len(w) || strings.Join(got[:len(w)], " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %q, want prefix %q", i+3, got, w)
		}
	}
	if !strings.Contains(out, "\n2 error(s):\n  0000_20_bad.yaml[1] ConfigMap default/kept: release.openshift.io/delete: \"false\"") ||
		strings.Count(out, "  0000_20_bad.yaml[1] ConfigMap default/kept:") != 1 {
		t.Errorf("report does not list each invalid manifest once:\n%s", out)
	}
	if !HasErrors(r) {
		t.Error("HasErrors() = false with an invalid manifest")
	}
	if HasErrors(Report{Manifests: ms[:2]}) {
		t.Error("HasErrors() = true without an invalid manifest")
	}

	buf.Reset()
	if err := WriteReport(&buf, Report{Manifests: ms, FeatureSets: []string{string(configv1.TechPreviewNoUpgrade)}}, "json"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Manifests []struct {
			Decisions map[string]struct{ Included, Delete, Invalid bool }
		}
		Errors []struct {
			File  string
			Index *int
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if d := got.Manifests[2].Decisions[string(configv1.TechPreviewNoUpgrade)]; !d.Invalid || d.Included || d.Delete {
		t.Errorf("kept decision = %+v, want invalid only", d)
	}
	if len(got.Errors) != 2 || got.Errors[1].File != "0000_30_tp.yaml" || got.Errors[1].Index == nil || *got.Errors[1].Index != 0 {
		t.Errorf("errors = %+v, want kept's and tp's with file and index", got.Errors)
	}
}

// seedDir is the seed's payload, shared with pkg/manifest's tests.
const seedDir = "../../../pkg/manifest/testdata/seed"

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
