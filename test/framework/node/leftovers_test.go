package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The leftover check sees each kind of thing a node can leave behind, and
// the sweep removes it: a process running from the node's directory, a
// mount under it, a network interface, an iptables chain and rule, a
// kernel setting. Root only, and never beside a running node (the sweep
// restores iptables to what it captured): `make test-cluster` runs it
// before the cluster tests, one package at a time.
func TestLeftoverCheckAndSweep(t *testing.T) {
	if os.Getenv("FEATUREGATE_TEST_CLUSTER") == "" || os.Geteuid() != 0 {
		t.Skip("root only, under `make test-cluster` (FEATUREGATE_TEST_CLUSTER=1)")
	}
	// The sweep would take another node's new pods and rules for leftovers.
	if err := Busy(); err != nil {
		t.Fatal(err)
	}
	before, err := captureHost()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Whatever happens below, the host is put back.
	t.Cleanup(func() { _ = before.sweep(dir, "") })
	if len(before.leftovers(dir, "")) != 1 { // the directory itself
		t.Fatalf("leftovers before anything was left: %q", before.leftovers(dir, ""))
	}
	// A process whose arguments name the directory, as a shim's do.
	marker := filepath.Join(dir, "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tail := exec.Command("tail", "-f", marker)
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = tail.Wait() }()
	mnt := filepath.Join(dir, "mnt")
	run(t, "mkdir", mnt)
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "link", "add", "fgleft0", "type", "bridge")
	run(t, "iptables", "-t", "filter", "-N", "FG-LEFTOVER")
	run(t, "iptables", "-t", "filter", "-A", "FG-LEFTOVER", "-j", "RETURN")
	const key = "vm.panic_on_oom"
	was := readSysctl(key)
	flipped := "1"
	if was == "1" {
		flipped = "0"
	}
	if err := os.WriteFile(sysctlPath(key), []byte(flipped), 0o644); err != nil {
		t.Fatal(err)
	}

	left := strings.Join(before.leftovers(dir, ""), "\n")
	for _, want := range []string{"process pid", "mount " + mnt, "network interface fgleft0", "FG-LEFTOVER", "sysctl " + key} {
		if !strings.Contains(left, want) {
			t.Errorf("the leftover check misses %q:\n%s", want, left)
		}
	}
	if err := before.sweep(dir, ""); err != nil {
		t.Errorf("sweep: %v", err)
	}
	if left := before.leftovers(dir, ""); len(left) > 0 {
		t.Errorf("left after the sweep:\n%s", strings.Join(left, "\n"))
	}
	if links, _ := linkNames(); slices.Contains(links, "fgleft0") {
		t.Error("fgleft0 still there")
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}
