package robustness

import (
	"strings"
	"testing"
	"time"
)

// history builds a history from events at offsets of t0, numbering lines.
type history struct {
	t0     time.Time
	events []Event
}

func newHistory() *history { return &history{t0: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)} }

func (h *history) at(d time.Duration) time.Time { return h.t0.Add(d) }

func (h *history) add(e Event) *history {
	e.Line = len(h.events) + 1
	h.events = append(h.events, e)
	return h
}

func (h *history) write(d time.Duration, value string) *history {
	return h.add(Event{Kind: KindWrite, Sent: h.at(d), T: h.at(d + 5*time.Millisecond), Value: value})
}

func (h *history) decide(d time.Duration, value string) *history {
	ok := 200
	return h.add(Event{Kind: KindDecision, Proc: "consumer", T: h.at(d), Value: value, Code: &ok})
}

func (h *history) refuse(d time.Duration) *history {
	no := 503
	return h.add(Event{Kind: KindDecision, Proc: "consumer", T: h.at(d), Code: &no})
}

func (h *history) proc(d time.Duration, name, snapshot string) *history {
	yes := true
	h.add(Event{Kind: KindStart, Proc: name, T: h.at(d)})
	h.add(Event{Kind: KindSnapshot, Proc: name, T: h.at(d), Value: snapshot})
	return h.add(Event{Kind: KindReady, Proc: name, T: h.at(d), Ready: &yes})
}

func (h *history) exit(d time.Duration, name string, code int, killed bool) *history {
	return h.add(Event{Kind: KindExit, Proc: name, T: h.at(d), Code: &code, Killed: killed})
}

func (h *history) fault(d time.Duration, name, phase string, stalls bool) *history {
	return h.add(Event{Kind: KindFault, Fault: name, Phase: phase, Stalls: stalls, T: h.at(d)})
}

func (h *history) end(d time.Duration) *history { return h.add(Event{Kind: KindEnd, T: h.at(d)}) }

// clean is a campaign that keeps every rule: a change from Default to
// TechPreview at 10 s, decisions on Default until 11 s (within the bound),
// refusals, then restarted processes on the new value.
func clean() *history {
	h := newHistory().write(0, "Default/enabled").
		proc(0, "consumer", "Default/enabled").proc(0, "operator-0", "Default/enabled")
	h.decide(5*time.Second, "Default/enabled").
		fault(8*time.Second, "link-hold", PhaseStart, true).
		write(10*time.Second, "TechPreviewNoUpgrade/enabled").
		decide(11*time.Second, "Default/enabled").
		refuse(12*time.Second).
		fault(14*time.Second, "link-hold", PhaseHeal, true).
		exit(14*time.Second, "consumer", 0, false).exit(14*time.Second, "operator-0", 0, false).
		proc(16*time.Second, "consumer", "TechPreviewNoUpgrade/enabled").proc(16*time.Second, "operator-0", "TechPreviewNoUpgrade/enabled")
	for d := 17 * time.Second; d <= 25*time.Second; d += time.Second {
		h.decide(d, "TechPreviewNoUpgrade/enabled")
	}
	return h.end(25 * time.Second)
}

func TestCheckerPassesAHistoryThatKeepsTheRules(t *testing.T) {
	if v := Check(clean().events, DefaultRules()); len(v) != 0 {
		t.Fatalf("violations in a clean history: %v", v)
	}
}

// Each rule fails the history that breaks it, naming the lines.
func TestCheckerCatchesEachBrokenRule(t *testing.T) {
	for name, tc := range map[string]struct {
		h    func() *history
		rule string
		line string
	}{
		"a decision on the old value 2.6 s after the change": {
			h:    func() *history { return clean().decide(12600*time.Millisecond, "Default/enabled") },
			rule: RuleStaleDecision, line: "history lines 10,",
		},
		"a decision on a value never written": {
			h:    func() *history { return clean().decide(20*time.Second, "CustomNoUpgrade/enabled") },
			rule: RuleStaleDecision,
		},
		"an object of the old feature set applied late": {
			h: func() *history {
				return clean().add(Event{Kind: KindApplied, Object: "only-default", Value: "Default", T: newHistory().at(13 * time.Second)})
			},
			rule: RuleStaleApply,
		},
		"an exit 1": {
			h:    func() *history { return clean().exit(20*time.Second, "operator-1", 1, false) },
			rule: RuleExit,
		},
		"a decision on the old value after the faults ended": {
			h: func() *history {
				return clean().decide(24500*time.Millisecond, "Default/enabled").end(26 * time.Second)
			},
			rule: RuleStaleDecision,
		},
		"refusals after the faults ended": {
			h:    func() *history { return clean().refuse(24500 * time.Millisecond).end(26 * time.Second) },
			rule: RuleSettled,
		},
		"a snapshot of a feature set not held since the process started": {
			// The seed's bug: the consumer restarted at 18 s, long after
			// the switch to TechPreview, and took Default.
			h: func() *history {
				return clean().exit(18*time.Second, "consumer", -1, true).proc(18500*time.Millisecond, "consumer", "Default")
			},
			rule: RuleUnread,
		},
		"no operator with the current feature set": {
			h:    func() *history { return clean().exit(24*time.Second, "operator-0", 0, false).end(26 * time.Second) },
			rule: RuleSettled,
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := Check(tc.h().events, DefaultRules())
			found := false
			for _, x := range v {
				if x.Rule == tc.rule && strings.Contains(x.String(), tc.line) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a %q violation (%q), got %v", tc.rule, tc.line, v)
			}
		})
	}
}

// A snapshot may be of any value the FeatureGate may have held while the
// read was in flight: one whose write was sent before the process started
// but answered after (it may have committed late), or one replaced by a
// write still unanswered when the snapshot was taken.
func TestCheckerTakesASnapshotOfAnyValueHeldDuringTheRead(t *testing.T) {
	for name, h := range map[string]*history{
		"the old value, its successor sent before the start, answered after": newHistory().write(0, "Default/enabled").
			add(Event{Kind: KindWrite, Sent: newHistory().at(10 * time.Second), T: newHistory().at(12 * time.Second), Value: "TechPreviewNoUpgrade/enabled"}).
			proc(11*time.Second, "consumer", "Default"),
		"the new value, written while the process started": newHistory().write(0, "Default/enabled").
			write(10*time.Second, "TechPreviewNoUpgrade/enabled").
			proc(10*time.Second, "consumer", "TechPreviewNoUpgrade"),
	} {
		t.Run(name, func(t *testing.T) {
			for _, v := range Check(h.events, DefaultRules()) {
				if v.Rule == RuleUnread {
					t.Fatalf("a snapshot it may have read judged not read: %v", v)
				}
			}
		})
	}
}

// A write started in time may land when a stalled link heals: excused.
func TestCheckerExcusesAnApplyLandingWhenAStallHeals(t *testing.T) {
	h := clean().add(Event{Kind: KindApplied, Object: "only-default", Value: "Default", T: newHistory().at(14*time.Second + 10*time.Millisecond)})
	for _, v := range Check(h.events, DefaultRules()) {
		if v.Rule == RuleStaleApply {
			t.Fatalf("an apply landing as the stall healed was judged stale: %v", v)
		}
	}
}

// SIGKILL is the campaign's doing, not the process's.
func TestCheckerExcusesKilledProcesses(t *testing.T) {
	h := clean().exit(20*time.Second, "operator-1", -1, true)
	for _, v := range Check(h.events, DefaultRules()) {
		if v.Rule == RuleExit {
			t.Fatalf("a SIGKILL was judged: %v", v)
		}
	}
}

// Rule 4 counts its quiet from when a server fault's API server served
// again, when that came after the heal; not from the heal alone, and no
// later than that.
func TestCheckerSettlesFromWhenTheAPIServerServesAgain(t *testing.T) {
	served := func(refuseAt time.Duration) *history {
		h := clean()
		h.fault(15*time.Second, "etcd-restart", PhaseStart, false).
			fault(15500*time.Millisecond, "etcd-restart", PhaseHeal, false).
			fault(16*time.Second, "etcd-restart", PhaseServed, false).
			refuse(refuseAt)
		return h.end(26 * time.Second)
	}
	if v := Check(served(20500*time.Millisecond).events, DefaultRules()); len(v) != 0 {
		t.Errorf("a refusal 4.5 s after the API server served again: %v", v)
	}
	v := Check(served(21500*time.Millisecond).events, DefaultRules())
	if len(v) != 1 || v[0].Rule != RuleSettled {
		t.Errorf("a refusal 5.5 s after the API server served again: want one %q violation, got %v", RuleSettled, v)
	}
}
