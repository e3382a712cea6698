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
	ws.wait() // none under way

	release := make(chan struct{})
	written := make(chan struct{}, 2)
	write := func() { <-release; written <- struct{}{} }
	ws.start(write)
	waited := make(chan struct{})
	go func() { ws.wait(); close(waited) }()
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
	ws.wait() // the second write
	if n := len(written); n != 2 {
		t.Fatalf("%d writes ended before the second wait returned, want 2", n)
	}
	ws.start(func() {})
	ws.wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.done) > 1 {
		t.Fatalf("%d ended writes kept; the next start prunes them", len(ws.done))
	}
}
