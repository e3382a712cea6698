package robustness

import (
	"context"
	"fmt"
	"slices"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// An exposure is a scripted stretch of a campaign: one situation in which a
// way of breaking the guard's promise shows, made to happen rather than
// drawn. The random draws make such situations likely on one machine and
// rare on another (the seed's own bug needs the consumer to start while its
// link is cut, which a draw of kill-consumer inside a draw of link-cut
// gives only when the restart beats the heal); an exposure makes each one
// certain, whatever the machine's speed, because it waits for what the
// processes did, not for a time.
//
// Every exposure starts from a settled consumer (deciding on the current
// value) and ends with its faults healed. Campaigns run theirs after the
// random traffic and faults, in the order given: the unpatched binaries
// must pass every one, and each planted bug names the one that exposes it.
type exposure func(ctx context.Context, c *campaign) error

// Exposures, by name.
const (
	// ExposeGateFlip flips the consumer's gate in its version's status
	// entry, the feature set unchanged, and no fault: a comparison that
	// misses gate changes keeps deciding on the old state.
	ExposeGateFlip = "gate-flip"
	// ExposeSilentChange holds the link (a watch gone silent), flips the
	// gate behind it, and keeps the hold past the freshness bound: a
	// process that vouches for a quiet watch decides on the old state.
	ExposeSilentChange = "silent-change"
	// ExposePartitionedChange cuts the twin's etcd member off from the
	// quorum, flips the gate through the other members, and keeps the
	// partition past the bound: the twin still answers from its watch
	// cache, so only a proof that etcd confirms (a consistent read) lapses.
	ExposePartitionedChange = "partitioned-change"
	// ExposeStartDuringCut moves the cluster off Default, cuts the link,
	// kills the consumer, and keeps the cut until the new life has tried
	// its startup read and for the bound after: the seed's own situation,
	// a process starting while the API refuses it after the feature set
	// left Default.
	ExposeStartDuringCut = "start-during-cut"
	// ExposeLapse holds the link past the bound (the proof lapses) and
	// heals it, with nothing written after: the quiet tail then judges
	// that the consumer decides again (rule 4). Last, when run with others:
	// a later write would restart the process and hide a lapse never
	// recovered from.
	ExposeLapse = "lapse"
)

// AllExposures are every exposure, in the order a campaign runs them.
var AllExposures = []string{ExposeGateFlip, ExposeSilentChange, ExposePartitionedChange, ExposeStartDuringCut, ExposeLapse}

var exposures = map[string]exposure{
	ExposeGateFlip: func(ctx context.Context, c *campaign) error {
		if err := c.flipGate(ctx); err != nil {
			return err
		}
		return harness.Wait(ctx, c.pastBound())
	},
	ExposeSilentChange: func(ctx context.Context, c *campaign) error {
		return c.changeDuring(ctx, "link-hold")
	},
	ExposePartitionedChange: func(ctx context.Context, c *campaign) error {
		return c.changeDuring(ctx, "etcd-partition")
	},
	ExposeStartDuringCut: func(ctx context.Context, c *campaign) error {
		if err := c.leaveDefault(ctx); err != nil {
			return err
		}
		if _, err := c.settleConsumer(ctx); err != nil {
			return err
		}
		cut := c.begin(ctx, "link-cut", 0)
		killedAt := time.Now()
		kill := c.begin(ctx, "kill-consumer", 0)
		// The new life's startup read, failed or (planted) taken anyway:
		// its log line, not a time, says the read was tried during the cut.
		err := c.waitFor(ctx, "the restarted consumer's startup read", killedAt, func(e Event) bool {
			return e.Proc == "consumer" && !e.T.Before(killedAt) && (e.Kind == KindUnread || e.Kind == KindSnapshot)
		})
		if err == nil {
			err = harness.Wait(ctx, c.pastBound())
		}
		c.end(ctx, "kill-consumer", kill)
		c.end(ctx, "link-cut", cut)
		return err
	},
	ExposeLapse: func(ctx context.Context, c *campaign) error {
		hold := c.begin(ctx, "link-hold", 0)
		err := harness.Wait(ctx, c.pastBound())
		c.end(ctx, "link-hold", hold)
		return err
	},
}

// expose runs the named exposures in turn.
func (c *campaign) expose(ctx context.Context, names []string) error {
	for _, name := range names {
		run, ok := exposures[name]
		if !ok {
			return fmt.Errorf("unknown exposure %q (known: %v)", name, AllExposures)
		}
		for attempt := 1; ; attempt++ {
			c.rec.Record(Event{Kind: KindExposure, Value: name, Phase: PhaseStart})
			settled, err := c.settleConsumer(ctx)
			if err == nil {
				err = run(ctx, c)
			}
			c.rec.Record(Event{Kind: KindExposure, Value: name, Phase: PhaseHeal})
			if err != nil {
				return fmt.Errorf("exposure %s: %w", name, err)
			}
			// The situation is the settled consumer's: one that was
			// already stopping on an earlier change (written during a
			// fault of the random part, seen only at its heal) lives
			// through none of it, and its next life reads afresh.
			if name == ExposeStartDuringCut || !c.stoppingBeforeWrite(settled) {
				break
			}
			if attempt == exposureAttempts {
				c.cfg.Logf("exposure %s: the consumer was stopping on an earlier change in each of %d attempts; going on", name, attempt)
				break
			}
			c.cfg.Logf("exposure %s: the consumer was stopping on an earlier change when it began; running it again", name)
		}
	}
	return nil
}

// exposureAttempts bounds how often an exposure is run again because the
// consumer was stopping on an earlier change: each restart reads the
// FeatureGate afresh, so a second attempt finds nothing pending.
const exposureAttempts = 3

// stoppingBeforeWrite is whether the consumer asked to stop, since (the
// decision it settled on), before
// the exposure's first write (or at all, for an exposure that writes
// nothing): on a change that was not the exposure's.
func (c *campaign) stoppingBeforeWrite(since time.Time) bool {
	write := time.Time{}
	var stops []time.Time
	for _, e := range c.rec.Events() {
		if e.T.Before(since) {
			continue
		}
		if e.Kind == KindWrite && write.IsZero() {
			write = e.Sent
		}
		if e.Kind == KindStopping && e.Proc == "consumer" {
			stops = append(stops, e.T)
		}
	}
	for _, t := range stops {
		if write.IsZero() || t.Before(write) {
			return true
		}
	}
	return false
}

// pastBound is how long an exposure keeps its situation: the freshness
// bound, the checker's allowance, and a second in which the poller's
// decisions (every 20 ms) show what the consumer makes of it.
func (c *campaign) pastBound() time.Duration {
	return c.cfg.Rules.Bound + c.cfg.Rules.Allowance + time.Second
}

// changeDuring flips the gate while fault kind holds, for pastBound after
// the write.
func (c *campaign) changeDuring(ctx context.Context, kind string) error {
	heal := c.begin(ctx, kind, 0)
	err := c.flipGate(ctx)
	if err == nil {
		err = harness.Wait(ctx, c.pastBound())
	}
	c.end(ctx, kind, heal)
	return err
}

// settleWithin bounds settleConsumer, unless Config.SettleWithin says
// otherwise, and every other wait of an exposure on what the processes
// did: a consumer restarts on a change within a second or two (the
// supervisor's backoff is at most 2 s).
const settleWithin = time.Minute

// settleConsumer waits until the consumer decides on the FeatureGate's
// current value. One that does not within Config.SettleWithin is counted
// (Result.Unsettled: the unpatched consumer must always settle) and the
// exposure goes on: a planted bug may have left the consumer deciding on
// an old value for good, which the checker judges, and the exposure must
// still be run.
func (c *campaign) settleConsumer(ctx context.Context) (settled time.Time, err error) {
	fg := &configv1.FeatureGate{}
	if err := c.admin.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		return time.Time{}, fmt.Errorf("read the FeatureGate: %w", err)
	}
	want, from := valueOf(fg), time.Now()
	limit := c.cfg.SettleWithin
	if limit <= 0 {
		limit = settleWithin
	}
	settled = from
	err = c.waitWithin(ctx, limit, "decision on "+want, from, func(e Event) bool {
		ok := e.Kind == KindDecision && e.Code != nil && *e.Code == 200 && e.Value == want && !e.Sent.Before(from)
		if ok {
			settled = e.Sent
		}
		return ok
	})
	if err != nil && ctx.Err() == nil {
		c.cfg.Logf("consumer not settled, the exposure goes on: err=%v", err)
		c.mu.Lock()
		c.unsettled++
		c.mu.Unlock()
		return from, nil
	}
	return settled, err
}

// waitFor waits, up to settleWithin, until the history has an event since
// that matches.
func (c *campaign) waitFor(ctx context.Context, what string, since time.Time, match func(Event) bool) error {
	return c.waitWithin(ctx, settleWithin, what, since, match)
}

// waitWithin is waitFor with its own limit.
func (c *campaign) waitWithin(ctx context.Context, limit time.Duration, what string, since time.Time, match func(Event) bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for !c.rec.Has(since, match) {
		if harness.Wait(ctx, 20*time.Millisecond) != nil {
			return fmt.Errorf("no %s within %s", what, limit)
		}
	}
	return nil
}

// flipGate flips the consumer's gate in its version's status entry.
func (c *campaign) flipGate(ctx context.Context) error {
	return c.write(ctx, func(fg *configv1.FeatureGate) bool {
		setEntry(fg, version, !gateEnabled(fg))
		return true
	})
}

// leaveDefault switches the feature set to TechPreviewNoUpgrade unless it
// is already another than Default.
func (c *campaign) leaveDefault(ctx context.Context) error {
	return c.write(ctx, func(fg *configv1.FeatureGate) bool {
		if fg.Spec.FeatureSet != configv1.Default {
			return false
		}
		fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
		fg.Spec.CustomNoUpgrade = nil
		return true
	})
}

// write reads the FeatureGate, lets edit change it (false: nothing to
// write), and writes it: the status when only this version's entry
// changed, else the spec, whose entry is then rewritten as
// cluster-config-operator would.
func (c *campaign) write(ctx context.Context, edit func(*configv1.FeatureGate) bool) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fg := &configv1.FeatureGate{}
	if err := c.admin.Get(wctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		return fmt.Errorf("read the FeatureGate: %w", err)
	}
	spec := fg.Spec.DeepCopy()
	if !edit(fg) {
		return nil
	}
	onlyStatus := spec.FeatureSet == fg.Spec.FeatureSet && customEqual(spec.CustomNoUpgrade, fg.Spec.CustomNoUpgrade)
	return c.commit(wctx, fg, onlyStatus)
}

func customEqual(a, b *configv1.CustomFeatureGates) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Enabled, b.Enabled) && slices.Equal(a.Disabled, b.Disabled)
}
