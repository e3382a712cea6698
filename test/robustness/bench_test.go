package robustness

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// tries is t tries of which failed failed, the first with err.
func tries(t, failed int, err string) Tries {
	if failed == 0 {
		err = ""
	}
	return Tries{Tried: t, Failed: failed, FirstErr: err}
}

const conflict = `Operation cannot be fulfilled on leases.coordination.k8s.io "featuregate-operator.featuregate-operator.io": the object has been modified`

// ciLike is a bench as CI's campaigns leave it (make test-robustness,
// seeds 1 and 2 together): one change lost to an etcd restart, one stolen
// lease lost to a conflict, one freeze whose server an overlapping kill
// had replaced, nothing missing at the end.
func ciLike() Bench {
	b := newBench()
	b.Changes = tries(4, 1, "context deadline exceeded")
	b.Faults["lease-stolen"] = tries(2, 1, conflict)
	b.Faults["apiserver-freeze"] = tries(2, 0, "")
	b.Faults["apiserver-kill"] = tries(3, 0, "")
	b.Faults["etcd-restart"] = tries(1, 0, "")
	b.Faults["link-hold"] = tries(3, 0, "")
	b.Heals["apiserver-freeze"] = tries(2, 1, "thaw kube-apiserver 4242: no such process")
	b.Heals["apiserver-kill"] = tries(3, 0, "")
	b.Heals["etcd-restart"] = tries(1, 0, "")
	b.Heals["link-hold"] = tries(3, 0, "")
	return b
}

// A bench that lost a few tries to overlapping faults, or half of them,
// or every try of a kind tried fewer than minFaultTries times, is healthy:
// today's green campaigns stay green.
func TestHealthPassesABenchThatLostAFewTries(t *testing.T) {
	for name, edit := range map[string]func(*Bench){
		"as CI leaves it":                         func(*Bench) {},
		"half the changes not made, not more":     func(b *Bench) { b.Changes = tries(4, 2, "context deadline exceeded") },
		"half a kind's injections failed":         func(b *Bench) { b.Faults["lease-stolen"] = tries(4, 2, conflict) },
		"every try of a kind tried only twice":    func(b *Bench) { b.Faults["lease-stolen"] = tries(2, 2, conflict) },
		"a failed heal, the server there at last": func(b *Bench) { b.Heals["apiserver-freeze"] = tries(2, 2, "no such process") },
		"no change tried (a campaign too short)":  func(b *Bench) { b.Changes = Tries{} },
		"two of three changes lost to overlaps":   func(b *Bench) { b.Changes = tries(3, 2, "context deadline exceeded") },
	} {
		t.Run(name, func(t *testing.T) {
			b := ciLike()
			edit(&b)
			if why := b.Broken(); len(why) != 0 {
				t.Fatalf("a healthy bench judged broken: %q", why)
			}
		})
	}
}

// A bench broken for most of a campaign fails it, and the reason names the
// counts that broke the rule.
func TestHealthCatchesABrokenBench(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Bench)
		want []string // in the one reason given
	}{
		"most changes not made (the admin API server was down)": {
			edit: func(b *Bench) { b.Changes = tries(6, 5, "context deadline exceeded") },
			want: []string{"FeatureGate changes not made: 5 of 6 tried", "context deadline exceeded"},
		},
		"no change made of the two tried": {
			edit: func(b *Bench) { b.Changes = tries(2, 2, "connection refused") },
			want: []string{"FeatureGate changes not made: 2 of 2 tried", "connection refused"},
		},
		"most injections of a kind failed": {
			edit: func(b *Bench) { b.Faults["lease-stolen"] = tries(3, 2, conflict) },
			want: []string{"fault lease-stolen not injected: 2 of 3 tried", "the object has been modified"},
		},
		"the API server missing after its heal gave up": {
			edit: func(b *Bench) {
				b.Heals["apiserver-kill"] = tries(3, 1, "not started in two minutes: timeout waiting for kube-apiserver")
				b.Missing = []string{"kube-apiserver"}
			},
			want: []string{"not there once every fault had healed: kube-apiserver", "apiserver-kill 1 of 3", "not started in two minutes",
				"apiserver-freeze 1 of 2"},
		},
		"a process whose supervisor gave up": {
			edit: func(b *Bench) { b.Heals = map[string]Tries{}; b.Missing = []string{"operator-1"} },
			want: []string{"not there once every fault had healed: operator-1 (heals failed: none)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := ciLike()
			tc.edit(&b)
			why := b.Broken()
			if len(why) != 1 {
				t.Fatalf("want one reason, got %q", why)
			}
			for _, w := range tc.want {
				if !strings.Contains(why[0], w) {
					t.Errorf("the reason %q does not say %q", why[0], w)
				}
			}
		})
	}
}

// A bench broken several ways gives each reason.
func TestHealthGivesEveryReason(t *testing.T) {
	b := ciLike()
	b.Changes = tries(5, 5, "connection refused")
	b.Faults["apiserver-freeze"] = tries(4, 4, "no kube-apiserver with --secure-port=1234")
	b.Missing = []string{"etcd"}
	if why := b.Broken(); len(why) != 3 {
		t.Fatalf("want three reasons (changes, apiserver-freeze, etcd missing), got %q", why)
	}
}

// Tries keeps the first error: a broken bench's later ones most often
// repeat it.
func TestHealthTriesKeepTheFirstError(t *testing.T) {
	var tr Tries
	tr.add(nil)
	tr.add(errors.New("first"))
	tr.add(errors.New("second"))
	if want := tries(3, 2, "first"); tr != want {
		t.Fatalf("got %+v, want %+v", tr, want)
	}
	tr.merge(tries(2, 1, "other"))
	if want := tries(5, 3, "first"); tr != want {
		t.Fatalf("merged: got %+v, want %+v", tr, want)
	}
}

func TestHealthFaultCountsNameWhatFailed(t *testing.T) {
	b := newBench()
	b.Faults["link-hold"] = tries(2, 0, "")
	b.Faults["lease-stolen"] = tries(2, 1, conflict)
	b.Faults["apiserver-freeze"] = tries(1, 0, "")
	b.Heals["apiserver-freeze"] = tries(1, 1, "no such process")
	if got, want := b.FaultCounts(), "apiserver-freeze 1 (1 not healed), lease-stolen 2 (1 not injected), link-hold 2"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := b.FirstErrors(); len(got) != 2 || got[0] != "lease-stolen not injected: "+conflict || got[1] != "apiserver-freeze not healed: no such process" {
		t.Fatalf("first errors: %q", got)
	}
}

// The report's table carries the bench's counts and its health, one broken
// campaign named by its seed; an error's | stays inside its cell.
func TestCampaignReportShowsTheBench(t *testing.T) {
	healthy := Result{Seed: 1, Writes: 5, Bench: ciLike()}
	broken := Result{Seed: 2, Writes: 1, Bench: ciLike()}
	broken.Bench.Changes = tries(6, 6, "dial tcp: a | b")
	report := reportOf([]Result{healthy, broken}, time.Minute, 1)
	for _, want := range []string{
		"| FeatureGate writes | 6 (10 changes tried, 7 not made) |",
		"| faults tried | apiserver-freeze 4 (2 not healed), apiserver-kill 6, etcd-restart 2, lease-stolen 4 (2 not injected), link-hold 6 |",
		"| first errors of the bench | change not made: context deadline exceeded; lease-stolen not injected: ",
		"| bench health (a broken bench fails the campaign) | broken: seed 2: FeatureGate changes not made: 6 of 6 tried, more than 50% (first error: dial tcp: a \\| b) |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no %q:\n%s", want, report)
		}
	}
	if report := reportOf([]Result{healthy}, time.Minute, 1); !strings.Contains(report, "| bench health (a broken bench fails the campaign) | ok") {
		t.Errorf("a healthy campaign's report does not say ok:\n%s", report)
	}
}
