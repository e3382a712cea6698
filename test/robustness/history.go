// Package robustness runs campaigns of random faults and random FeatureGate
// changes against the real binaries (etcd, kube-apiservers, the operator
// with two replicas under leader election, examples/consumer), records what
// happened as a history of JSON lines, and judges that history with a
// checker that knows nothing of the code under test: only what was written
// to the FeatureGate, when, and what the processes decided.
//
// The promise it checks is the guard's: no decision on a feature set that
// stopped being the cluster's more than the freshness bound ago (plus a
// stated allowance), no exit but 0, and, once the faults end, a ready
// process running with the cluster's current feature set.
package robustness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kinds of events in a history.
const (
	// KindWrite is a FeatureGate write as the API server committed it:
	// Sent when the request left, T when the answer came, Value and RV
	// what it committed.
	KindWrite = "write"
	// KindDecision is an answer of the consumer's /decide: Sent when the
	// request left (the decision was made after it, within the poller's
	// 500 ms timeout), T when the answer arrived, Value what it decided on.
	KindDecision = "decision"
	// KindApplied is an object the operator applied, as a watch through an
	// API server no fault touches saw it: Object its name, Value the
	// feature set that includes it.
	KindApplied = "applied"
	// KindRemoved is a payload object the campaign deleted (Object), so
	// that the operator's next run applies it again where it is included:
	// an apply a watch sees, for rule 2 to judge.
	KindRemoved = "removed"
	// KindSnapshot is a process's startup snapshot (its log line).
	KindSnapshot = "snapshot"
	// KindUnread is a process's startup read that failed (its log line:
	// the guard retries, with no feature set assumed).
	KindUnread = "unread"
	// KindStopping is a process's request to stop on a change it found
	// (its log line): an exposure begun while the consumer was already
	// stopping on an earlier change is run again.
	KindStopping = "stopping"
	// KindExposure is a scripted exposure starting or ending (Value its
	// name, Phase start or heal).
	KindExposure = "exposure"
	// KindReady is a readiness change of a process (Ready).
	KindReady = "ready"
	// KindLeading is an operator replica taking the leader election lease
	// (its log line).
	KindLeading = "leading"
	// KindStart and KindExit are a process started and ended (Code;
	// Killed when the campaign killed it).
	KindStart = "start"
	KindExit  = "exit"
	// KindFault is a fault starting or healing (Fault, Phase).
	KindFault = "fault"
	// KindEnd closes a campaign: every fault healed since T minus the
	// quiet period.
	KindEnd = "end"
)

// Fault phases.
const (
	PhaseStart = "start"
	PhaseHeal  = "heal"
	// PhaseServed follows the heal of a fault of the servers once the
	// processes' API server answers a consistent read of the FeatureGate.
	PhaseServed = "served"
)

// Event is one line of a history.
type Event struct {
	// Line is the event's line number in its file (1-based), for reports.
	Line   int       `json:"-"`
	T      time.Time `json:"t"`
	Kind   string    `json:"kind"`
	Proc   string    `json:"proc,omitempty"`
	Value  string    `json:"value,omitempty"`
	RV     string    `json:"rv,omitempty"`
	Sent   time.Time `json:"sent,omitzero"`
	Object string    `json:"object,omitempty"`
	Fault  string    `json:"fault,omitempty"`
	Phase  string    `json:"phase,omitempty"`
	// Stalls marks a fault that holds requests in flight (a silent link, a
	// frozen API server, one cut off from etcd): what was sent before it
	// may land when it heals.
	Stalls bool `json:"stalls,omitempty"`
	// Listed marks an applied object a list showed, not a watch event:
	// when it was written is not known, and rule 2 does not judge it.
	Listed bool  `json:"listed,omitempty"`
	Ready  *bool `json:"ready,omitempty"`
	Code   *int  `json:"code,omitempty"`
	Killed bool  `json:"killed,omitempty"`
	Seed   int64 `json:"seed,omitempty"`
}

// Recorder appends events to a history file, one JSON object a line, in
// the order they are recorded.
type Recorder struct {
	mu     sync.Mutex
	w      *bufio.Writer
	f      *os.File
	events []Event
}

// NewRecorder creates (truncates) the history file at path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, w: bufio.NewWriter(f)}, nil
}

// Record appends e; a zero T is now.
func (r *Recorder) Record(e Event) {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Line = len(r.events) + 1
	r.events = append(r.events, e)
	data, err := json.Marshal(e)
	if err == nil {
		// Flushed line by line: a campaign cut short keeps its history.
		_, _ = r.w.Write(append(data, '\n'))
		_ = r.w.Flush()
	}
}

// Has reports whether an event recorded since (by T, give or take the
// second by which a log line's time may trail its recording) matches.
func (r *Recorder) Has(since time.Time, match func(Event) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0 && !r.events[i].T.Before(since.Add(-time.Second)); i-- {
		if match(r.events[i]) {
			return true
		}
	}
	return false
}

// Events returns what was recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil {
		return err
	}
	return r.f.Close()
}

// Load reads a history, numbering its lines.
func Load(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		e.Line = n
		out = append(out, e)
	}
	return out, sc.Err()
}
