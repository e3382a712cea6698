package main

import (
	"errors"
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

// A lost lease is an ordinary stop (exit 0); other manager errors are not.
func TestLeaderElectionLost(t *testing.T) {
	if !leaderElectionLost(errors.New("leader election lost")) {
		t.Error("controller-runtime's error not recognised")
	}
	if leaderElectionLost(errors.New("failed to wait for caches to sync")) {
		t.Error("another error taken for a lost lease")
	}
}
