package featuregate

import (
	"testing"
	"time"
)

// flush waits for every write started before it, including one started
// while an earlier flush waits (a runnable that outlived the manager's
// drain), and returns at once when none is under way.
func TestWritesWaitForEveryWriteStartedBefore(t *testing.T) {
	ws := &writes{}
	ws.wait(0) // none under way

	release := make(chan struct{})
	written := make(chan struct{}, 2)
	write := func() { <-release; written <- struct{}{} }
	ws.start(write)
	waited := make(chan struct{})
	go func() { ws.wait(0); close(waited) }()
	ws.start(write) // while the first wait runs
	select {
	case <-waited:
		t.Fatal("wait returned before the write it waits for ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once the writes ended")
	}
	ws.wait(0) // the second write
	if n := len(written); n != 2 {
		t.Fatalf("%d writes ended before the second wait returned, want 2", n)
	}
	ws.start(func() {})
	ws.wait(0)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.done) > 1 {
		t.Fatalf("%d ended writes kept; the next start prunes them", len(ws.done))
	}
}

// With a budget, wait gives up on writes still under way once it passed,
// saying how many.
func TestWritesWaitWithinABudget(t *testing.T) {
	ws := &writes{}
	release := make(chan struct{})
	defer close(release)
	ws.start(func() {})
	ws.start(func() { <-release })
	started := time.Now()
	if left := ws.wait(50 * time.Millisecond); left != 1 {
		t.Fatalf("%d writes left, want 1", left)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("waited %s past a 50 ms budget", took)
	}
}
