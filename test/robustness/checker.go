package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Rules are the checker's numbers.
type Rules struct {
	// Bound is the guard's freshness bound: Current vouches for proof no
	// older than it.
	Bound time.Duration
	// Allowance is the delivery slack on top of it: a write commits after
	// it was sent, an answer travels back after it was decided.
	Allowance time.Duration
	// Settle is how soon after the last fault healed and the last write a
	// ready process must run with the cluster's current value.
	Settle time.Duration
}

// DefaultRules are the guard's default bound, 500 ms of allowance and the
// issue's 5 s to settle.
func DefaultRules() Rules {
	return Rules{Bound: 2 * time.Second, Allowance: 500 * time.Millisecond, Settle: 5 * time.Second}
}

// Violation is a broken rule, with the history lines that show it.
type Violation struct {
	Rule   string
	Detail string
	Lines  []int
}

func (v Violation) String() string {
	lines := make([]string, len(v.Lines))
	for i, l := range v.Lines {
		lines[i] = fmt.Sprint(l)
	}
	return fmt.Sprintf("%s: %s (history lines %s)", v.Rule, v.Detail, strings.Join(lines, ", "))
}

// The rules, by name.
const (
	RuleStaleDecision = "stale decision"
	RuleStaleApply    = "excluded object applied"
	RuleExit          = "non-zero exit"
	RuleSettled       = "not settled"
	RuleUnread        = "snapshot not read"
)

// Check judges a history. The rules, all here:
//
//  1. stale decision: a decision on value V at time t (when its request was
//     sent: the earliest it can have been made) while the FeatureGate had
//     held other values since before t − (Bound + Allowance). Values
//     change when writes are sent (the earliest they can commit), so the
//     rule never excuses a late commit.
//  2. excluded object applied: the same for an object the operator
//     applied, against the feature set that includes it, unless a fault
//     that holds requests in flight healed since the feature set was last
//     that one (a write started in time may land when the link returns).
//  3. non-zero exit: any exit but 0 that the campaign did not cause by
//     SIGKILL.
//  4. not settled: from Settle after the last fault healed (and its API
//     server served again, for a fault of the servers) and the last write
//     until the end, every running process is ready, the consumer
//     decides only on the current value, and a ready operator replica runs
//     with the current feature set.
//  5. snapshot not read: a process's startup snapshot on a feature set the
//     FeatureGate held at no moment between the process's start and the
//     snapshot's log line: a value it cannot have read (the seed's own
//     bug, a failed read taken for Default). It needs no window: the read
//     was sent after the start and answered before the line, and a value
//     may have held from when its write was sent until the next write was
//     answered.
func Check(h []Event, r Rules) []Violation {
	var out []Violation
	tl := newTimeline(h)
	window := r.Bound + r.Allowance
	started := map[string]Event{}
	var stalls []Event
	for _, e := range h {
		if e.Kind == KindFault && e.Stalls && e.Phase == PhaseHeal {
			stalls = append(stalls, e)
		}
	}
	for _, e := range h {
		switch e.Kind {
		case KindDecision:
			if e.Code == nil || *e.Code != 200 {
				continue
			}
			at := decidedAt(e)
			if held, since, ok := tl.staleFor(at, func(v string) bool { return v == e.Value }); ok && held > window {
				out = append(out, Violation{RuleStaleDecision,
					fmt.Sprintf("%s decided on %s at %s; the FeatureGate had held %s for %s", e.Proc, e.Value, at.Format(stamp), since.Value, held.Round(time.Millisecond)),
					[]int{since.Line, e.Line}})
			}
		case KindApplied:
			held, since, by, stale := staleApply(e, tl, stalls, window)
			if stale && by == nil {
				out = append(out, Violation{RuleStaleApply,
					fmt.Sprintf("%s (for %s) applied at %s; the feature set had been another for %s", e.Object, e.Value, e.T.Format(stamp), held.Round(time.Millisecond)),
					[]int{since.Line, e.Line}})
			}
		case KindStart:
			started[e.Proc] = e
		case KindSnapshot:
			start, ok := started[e.Proc]
			if ok && !tl.heldDuring(start.T, e.T, func(v string) bool { return featureSetOf(v) == featureSetOf(e.Value) }) {
				out = append(out, Violation{RuleUnread,
					fmt.Sprintf("%s took a snapshot of %s at %s; the FeatureGate held no such feature set since the process started at %s", e.Proc, featureSetOf(e.Value), e.T.Format(stamp), start.T.Format(stamp)),
					[]int{start.Line, e.Line}})
			}
		case KindExit:
			if e.Code != nil && *e.Code != 0 && !e.Killed {
				out = append(out, Violation{RuleExit, fmt.Sprintf("%s exited %d", e.Proc, *e.Code), []int{e.Line}})
			}
		}
	}
	return append(out, settled(h, tl, r)...)
}

const stamp = "15:04:05.000"

// staleApply judges one apply: stale when its feature set had been another
// for longer than window, and then excused (by, the heal of a fault that
// held writes in flight since the feature set was last its) or not.
func staleApply(e Event, tl timeline, stalls []Event, window time.Duration) (held time.Duration, since Event, by *Event, stale bool) {
	if e.Listed {
		return 0, Event{}, nil, false // when it was written is not known
	}
	held, since, ok := tl.staleFor(e.T, func(v string) bool { return featureSetOf(v) == e.Value })
	if !ok || held <= window {
		return 0, Event{}, nil, false
	}
	for i, s := range stalls {
		if s.T.After(e.T.Add(-held)) && !s.T.After(e.T) {
			return held, since, &stalls[i], true
		}
	}
	return held, since, nil, true
}

// Late is an apply that landed after its feature set had changed, excused
// by a fault that held it in flight: the residual window of a write
// decided before a pause, a held link or a frozen API server and sent
// after it (Kubernetes has no fencing across objects).
type Late struct {
	Object string
	// After is how long after the heal it landed; Held how long the
	// feature set had been another.
	After, Held time.Duration
	Fault       string
}

// LateApplies lists the excused stale applies of a history.
func LateApplies(h []Event, r Rules) []Late {
	tl := newTimeline(h)
	var stalls []Event
	for _, e := range h {
		if e.Kind == KindFault && e.Stalls && e.Phase == PhaseHeal {
			stalls = append(stalls, e)
		}
	}
	var out []Late
	for _, e := range h {
		if e.Kind != KindApplied {
			continue
		}
		if held, _, by, stale := staleApply(e, tl, stalls, r.Bound+r.Allowance); stale && by != nil {
			out = append(out, Late{Object: e.Object, After: e.T.Sub(by.T), Held: held, Fault: by.Fault})
		}
	}
	return out
}

// decidedAt is the earliest moment a decision can have been made: when its
// request was sent, when that is known.
func decidedAt(e Event) time.Time {
	if !e.Sent.IsZero() {
		return e.Sent
	}
	return e.T
}

// settled is rule 4.
func settled(h []Event, tl timeline, r Rules) []Violation {
	var end *Event
	quiet := time.Time{}
	for i := range h {
		e := &h[i]
		switch {
		case e.Kind == KindEnd:
			end = e
		case e.Kind == KindFault && (e.Phase == PhaseHeal || e.Phase == PhaseServed), e.Kind == KindWrite:
			quiet = later(quiet, e.T)
		}
	}
	if end == nil || len(tl.writes) == 0 {
		return nil // no campaign end recorded: nothing to judge
	}
	from := quiet.Add(r.Settle)
	if !from.Before(end.T) {
		return []Violation{{RuleSettled, fmt.Sprintf("the campaign ended %s after the last fault or write, before %s of quiet", end.T.Sub(quiet).Round(time.Millisecond), r.Settle), []int{end.Line}}}
	}
	current := tl.writes[len(tl.writes)-1]
	var out []Violation
	decided := 0
	for _, e := range h {
		if e.Kind != KindDecision || e.T.Before(from) || e.T.After(end.T) {
			continue
		}
		decided++
		if e.Code == nil || *e.Code != 200 || e.Value != current.Value {
			out = append(out, Violation{RuleSettled, fmt.Sprintf("%s %s after the last fault or write: not deciding on the current value %s", e.Proc, e.T.Sub(quiet).Round(time.Millisecond), current.Value), []int{current.Line, e.Line}})
			break
		}
	}
	if decided == 0 {
		out = append(out, Violation{RuleSettled, "no decision after the faults ended", []int{end.Line}})
	}
	// Each process's state at the end.
	type state struct {
		running, ready bool
		snapshot       string
		line           int
		since          time.Time
	}
	procs := map[string]*state{}
	for _, e := range h {
		if e.T.After(end.T) || e.Proc == "" {
			continue
		}
		s := procs[e.Proc]
		if s == nil {
			s = &state{}
			procs[e.Proc] = s
		}
		switch e.Kind {
		case KindStart:
			*s = state{running: true, line: e.Line}
		case KindExit:
			s.running, s.ready, s.line = false, false, e.Line
		case KindReady:
			s.ready, s.since, s.line = *e.Ready, e.T, e.Line
		case KindSnapshot:
			s.snapshot = e.Value
		}
	}
	names := make([]string, 0, len(procs))
	for n := range procs {
		names = append(names, n)
	}
	sort.Strings(names)
	operatorCurrent := false
	for _, n := range names {
		s := procs[n]
		if !s.running {
			continue
		}
		if !s.ready {
			out = append(out, Violation{RuleSettled, fmt.Sprintf("%s runs unready at the end", n), []int{s.line}})
			continue
		}
		if strings.HasPrefix(n, "operator") && featureSetOf(s.snapshot) == featureSetOf(current.Value) {
			operatorCurrent = true
		}
	}
	if !operatorCurrent {
		out = append(out, Violation{RuleSettled, "no ready operator replica runs with the current feature set " + featureSetOf(current.Value), []int{current.Line, end.Line}})
	}
	return out
}

// timeline is the FeatureGate's values over time, by when each write was
// sent.
type timeline struct{ writes []Event }

func newTimeline(h []Event) timeline {
	var ws []Event
	for _, e := range h {
		if e.Kind == KindWrite {
			ws = append(ws, e)
		}
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Sent.Before(ws[j].Sent) })
	return timeline{writes: ws}
}

// staleFor is how long, at t, the FeatureGate had held values that match
// rejects, and the write that began that stretch; ok is false when the
// value at t matches, or when nothing was written before t.
func (tl timeline) staleFor(t time.Time, match func(string) bool) (held time.Duration, since Event, ok bool) {
	last := -1
	for i, w := range tl.writes {
		if w.Sent.After(t) {
			break
		}
		last = i
	}
	if last < 0 || match(tl.writes[last].Value) {
		return 0, Event{}, false
	}
	// Walk back to the first write of the stretch of other values.
	first := last
	for first > 0 && !match(tl.writes[first-1].Value) {
		first--
	}
	return t.Sub(tl.writes[first].Sent), tl.writes[first], true
}

// heldDuring reports whether the FeatureGate may have held a value that
// matches at some moment of [from, to]: a written value may hold from when
// its write was sent until a write sent after its answer was answered (the
// next one to surely commit after it).
func (tl timeline) heldDuring(from, to time.Time, match func(string) bool) bool {
	for i, w := range tl.writes {
		if !match(w.Value) || w.Sent.After(to) {
			continue
		}
		until := time.Time{} // still holding
		for _, next := range tl.writes[i+1:] {
			if next.Sent.After(w.T) {
				until = next.T
				break
			}
		}
		if until.IsZero() || !until.Before(from) {
			return true
		}
	}
	return false
}

// featureSetOf is the feature set of a value "featureSet/gate-state".
func featureSetOf(v string) string {
	fs, _, _ := strings.Cut(v, "/")
	return fs
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
