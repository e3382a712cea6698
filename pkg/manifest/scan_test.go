package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const configMapYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Every entry that is not loaded says why; none of them blocks or fills a
// run: a FIFO is never opened, /dev/zero never read, an oversized file is
// refused by its size.
func TestScanReportsWhatItDoesNotRead(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "0000_10_ok.yaml"), strings.ReplaceAll(configMapYAML, "%s", "ok"))
	writeFile(t, filepath.Join(dir, "image-references"), "{}")
	if err := os.Mkdir(filepath.Join(dir, "0000_20_sub.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "0000_30_pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "0000_40_zero.yaml")); err != nil {
		t.Fatal(err)
	}
	big := strings.ReplaceAll(configMapYAML, "%s", "big") + "data:\n  x: " + strings.Repeat("a", 2048) + "\n"
	writeFile(t, filepath.Join(dir, "0000_50_big.yaml"), big)

	done := make(chan Payload, 1)
	go func() { done <- Scan(dir, Options{MaxFileSize: 1024, Settle: -1}) }()
	var p Payload
	select {
	case p = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Scan blocked")
	}
	if len(p.Manifests) != 1 || p.Manifests[0].Object.GetName() != "ok" {
		t.Fatalf("manifests: %v", p.Manifests)
	}
	want := map[string]string{
		"image-references":  "not a .yaml, .yml or .json file",
		"0000_20_sub.yaml":  "a directory",
		"0000_30_pipe.yaml": "not a regular file (p",
		"0000_40_zero.yaml": "not a regular file (D",
	}
	got := map[string]string{}
	for _, s := range p.Skipped {
		got[s.Name] = s.Reason
	}
	for name, reason := range want {
		if !strings.HasPrefix(got[name], reason) {
			t.Errorf("skipped %s: got %q, want a reason starting %q", name, got[name], reason)
		}
	}
	if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Error(), "0000_50_big.yaml: file is") || !strings.Contains(p.Errors[0].Error(), "1024-byte limit") {
		t.Errorf("errors: %v", p.Errors)
	}
}

// A manifest rewritten in place while a run reads it (its body first, its
// feature-set annotation 0.3 s later) is read whole, never half.
func TestScanWaitsForAFileRewrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0000_10_cm.yaml")
	body := strings.ReplaceAll(configMapYAML, "%s", "tp")
	writeFile(t, path, body)
	written := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the writer's pause between its two writes
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString("  annotations:\n    release.openshift.io/feature-set: TechPreviewNoUpgrade\n")
			err = errors.Join(err, f.Close())
		}
		written <- err
	}()
	p := Scan(dir, Options{})
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if len(p.Manifests) != 1 || len(p.Errors) != 0 {
		t.Fatalf("manifests %v, errors %v", p.Manifests, p.Errors)
	}
	if got := p.Manifests[0].Object.GetAnnotations()[featureSetAnnotation]; got != "TechPreviewNoUpgrade" {
		t.Fatalf("read half a file: feature-set annotation %q", got)
	}
}

// A ConfigMap volume is read through its one ..data generation, and its
// bookkeeping entries are no manifests.
func TestScanReadsAConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "..2026_12_03_08_00_00.000000001")
	if err := os.Mkdir(gen, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(gen, "0000_10_a.yaml"), strings.ReplaceAll(configMapYAML, "%s", "a"))
	for _, link := range [][2]string{{filepath.Base(gen), "..data"}, {"..data/0000_10_a.yaml", "0000_10_a.yaml"}} {
		if err := os.Symlink(link[0], filepath.Join(dir, link[1])); err != nil {
			t.Fatal(err)
		}
	}
	p := Scan(dir, Options{Settle: -1})
	if len(p.Manifests) != 1 || p.Manifests[0].Object.GetName() != "a" || len(p.Errors) != 0 || len(p.Skipped) != 0 {
		t.Fatalf("got %+v", p)
	}
}
