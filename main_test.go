package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The kubelet's namespace file ends with no newline today; a hand-made one
// might. Outside a pod there is no file and no namespace to relate.
func TestOwnNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "namespace")
	if got := ownNamespace(path); got != "" {
		t.Errorf("no file: %q, want none", got)
	}
	if err := os.WriteFile(path, []byte("featuregate-operator-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ownNamespace(path); got != "featuregate-operator-system" {
		t.Errorf("got %q, want featuregate-operator-system", got)
	}
}
