package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/featuregate-operator/operator/internal/cmd/audit"
	"github.com/featuregate-operator/operator/internal/cmd/manifests"
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

// Help is asked for, not bad input: every subcommand's --help exits 0 and
// prints its usage; an unknown flag or an argument stays exit 2.
func TestSubcommandHelpExitsZero(t *testing.T) {
	for name, cmd := range map[string]func([]string, io.Writer, io.Writer) int{"manifests": manifests.Run, "audit": audit.Run} {
		for _, help := range []string{"--help", "-h"} {
			var out, errOut bytes.Buffer
			if code := cmd([]string{help}, &out, &errOut); code != 0 {
				t.Errorf("%s %s: exit %d, want 0", name, help, code)
			}
			if !strings.Contains(errOut.String(), "manager "+name) {
				t.Errorf("%s %s printed no usage: %q", name, help, errOut.String())
			}
		}
		var out, errOut bytes.Buffer
		if code := cmd([]string{"--no-such-flag"}, &out, &errOut); code != 2 {
			t.Errorf("%s --no-such-flag: exit %d, want 2", name, code)
		}
		errOut.Reset()
		if code := cmd([]string{"--manifests-dir=.", "stray"}, &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), name+`: unexpected arguments ["stray"]`) {
			t.Errorf("%s with an argument: exit %d, %q; want 2, naming it", name, code, errOut.String())
		}
	}
}
