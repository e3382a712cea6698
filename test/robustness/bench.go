package robustness

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Tries counts the tries of one thing a campaign does to its bench and
// those that failed, keeping the first failure's error: the later ones of a
// broken bench are most often the same.
type Tries struct {
	Tried, Failed int
	FirstErr      string
}

// add counts one try that ended with err (nil: it worked).
func (t *Tries) add(err error) {
	t.Tried++
	if err == nil {
		return
	}
	t.Failed++
	if t.FirstErr == "" {
		t.FirstErr = err.Error()
	}
}

// merge adds o's tries to t's, keeping t's first error when it has one.
func (t *Tries) merge(o Tries) {
	t.Tried += o.Tried
	t.Failed += o.Failed
	if t.FirstErr == "" {
		t.FirstErr = o.FirstErr
	}
}

// Bench is what a campaign tried to do to its bench and could not. A
// campaign whose changes were not written or whose faults were not injected
// judges a quiet cluster and passes: only these counts tell a broken bench
// from a quiet one (issue 34, item 2).
type Bench struct {
	// Changes are the FeatureGate changes tried (a read of the FeatureGate,
	// its write and, with Config.EntryRewrite, the status rewrite) and
	// those not made; one cut short by the campaign's end is not a try.
	Changes Tries
	// Faults are the injections tried and those that failed, by kind.
	Faults map[string]Tries
	// Heals are the heals tried and those that failed, by kind; a kind
	// whose fault heals by itself (a kill, a stolen lease) has none.
	Heals map[string]Tries
	// Missing names the servers and supervised processes that were not
	// there once every fault had healed (see campaign.missing).
	Missing []string
}

func newBench() Bench {
	return Bench{Faults: map[string]Tries{}, Heals: map[string]Tries{}}
}

// addTo counts one try of kind in m.
func addTo(m map[string]Tries, kind string, err error) {
	t := m[kind]
	t.add(err)
	m[kind] = t
}

// merge adds o's counts to b's (the report's totals over campaigns).
func (b *Bench) merge(o Bench) {
	if b.Faults == nil {
		*b = newBench()
	}
	b.Changes.merge(o.Changes)
	for k, t := range o.Faults {
		sum := b.Faults[k]
		sum.merge(t)
		b.Faults[k] = sum
	}
	for k, t := range o.Heals {
		sum := b.Heals[k]
		sum.merge(t)
		b.Heals[k] = sum
	}
	b.Missing = append(b.Missing, o.Missing...)
}

// The bench-health rule's thresholds. A healthy bench loses a few tries to
// the overlap of faults, and CI's campaigns (make test-robustness) do: a
// change sent while etcd restarts waits out its 10 s timeout under the
// unproxied API server (seed 1 loses one so); a stolen lease races the
// leader's renewal and conflicts (seed 2: 1 of 2); an apiserver-freeze
// finds no API server while apiserver-kill's restart runs. None of these
// comes near half of a kind's tries; a bench whose admin API server, etcd
// or fault proxies were broken does.
const (
	// brokenShare is the share of failed tries beyond which the thing
	// tried was broken rather than crossed by another fault: more than
	// half.
	brokenShare = 0.5
	// minFaultTries is how often a fault kind must have been tried before
	// its share of failures is judged: a 40 s campaign tries most kinds
	// once or twice, and one overlap then makes half.
	minFaultTries = 3
	// minChangeTries is how many changes must have been tried before their
	// share of failures is judged: CI's seed 1 tries three, and an etcd
	// restart can cost one its 10 s timeout; two overlapping would make
	// two of three. A campaign that made none of the changes it tried is
	// broken whatever their number: it judged no change at all, the quiet
	// bench the rule is for.
	minChangeTries = 4
)

// mostlyFailed is whether more than brokenShare of t's tries failed.
func (t Tries) mostlyFailed() bool {
	return t.Tried > 0 && float64(t.Failed) > brokenShare*float64(t.Tried)
}

// Broken is the bench-health rule: why the campaign's bench was broken for
// a large part of its time, one sentence a broken condition naming the
// counts that broke it; none when healthy. It fails a campaign when
//
//   - every FeatureGate change it tried was not made, or more than half of
//     them with at least minChangeTries tried;
//   - more than half of a fault kind's injections failed, the kind tried at
//     least minFaultTries times;
//   - a server or a supervised process was missing once every fault had
//     healed, whatever the heals returned.
//
// A heal that failed while everything was there at the end does not fail
// it: an apiserver-freeze's SIGCONT finds no such process when an
// apiserver-kill killed the stopped server meanwhile, and that kill's own
// heal started a new one (see campaign.start). Its count is reported.
func (b Bench) Broken() []string {
	var why []string
	if c := b.Changes; (c.Tried >= minChangeTries && c.mostlyFailed()) || (c.Tried > 0 && c.Failed == c.Tried) {
		why = append(why, fmt.Sprintf("FeatureGate changes not made: %d of %d tried, more than %.0f%% (first error: %s)",
			b.Changes.Failed, b.Changes.Tried, 100*brokenShare, b.Changes.FirstErr))
	}
	for _, kind := range slices.Sorted(maps.Keys(b.Faults)) {
		if t := b.Faults[kind]; t.Tried >= minFaultTries && t.mostlyFailed() {
			why = append(why, fmt.Sprintf("fault %s not injected: %d of %d tried, more than %.0f%% (first error: %s)",
				kind, t.Failed, t.Tried, 100*brokenShare, t.FirstErr))
		}
	}
	if len(b.Missing) > 0 {
		why = append(why, fmt.Sprintf("not there once every fault had healed: %s (heals failed: %s)",
			strings.Join(b.Missing, ", "), b.healsFailed()))
	}
	return why
}

// healsFailed lists the failed heals by kind with their first error, or
// says there were none.
func (b Bench) healsFailed() string {
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(b.Heals)) {
		if t := b.Heals[kind]; t.Failed > 0 {
			out = append(out, fmt.Sprintf("%s %d of %d, first error: %s", kind, t.Failed, t.Tried, t.FirstErr))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// FaultCounts is the faults tried by kind, each with how many were not
// injected and not healed when any: "link-hold 2, lease-stolen 2 (1 not
// injected)".
func (b Bench) FaultCounts() string {
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(b.Faults)) {
		s := fmt.Sprintf("%s %d", kind, b.Faults[kind].Tried)
		var failed []string
		if n := b.Faults[kind].Failed; n > 0 {
			failed = append(failed, fmt.Sprintf("%d not injected", n))
		}
		if n := b.Heals[kind].Failed; n > 0 {
			failed = append(failed, fmt.Sprintf("%d not healed", n))
		}
		if len(failed) > 0 {
			s += " (" + strings.Join(failed, ", ") + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// FirstErrors is the first error of each thing that failed, one line each:
// "change not made: …", "lease-stolen not injected: …", "apiserver-freeze
// not healed: …".
func (b Bench) FirstErrors() []string {
	var out []string
	if b.Changes.Failed > 0 {
		out = append(out, "change not made: "+b.Changes.FirstErr)
	}
	for _, kind := range slices.Sorted(maps.Keys(b.Faults)) {
		if t := b.Faults[kind]; t.Failed > 0 {
			out = append(out, kind+" not injected: "+t.FirstErr)
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(b.Heals)) {
		if t := b.Heals[kind]; t.Failed > 0 {
			out = append(out, kind+" not healed: "+t.FirstErr)
		}
	}
	return out
}
