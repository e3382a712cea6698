package featuregate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
)

// freshness is the guard's proof that its snapshot still holds, with a
// deadline, as a leader's lease is: an open watch that has gone quiet proves
// nothing (a dead link, a frozen API server and one cut off from etcd all
// look like a quiet watch), so the monitor keeps sending consistent reads,
// which only an API server that still reaches etcd can answer, and each
// answer that matches the snapshot is proof as of the moment the read was
// sent. Current is true only while the newest proof is younger than bound.
type freshness struct {
	bound time.Duration
	// epoch makes proof times monotonic: they are durations since it.
	epoch time.Time
	// provenAt is when the newest proof's read was sent, as time since
	// epoch; noProof before the first.
	provenAt atomic.Int64
}

const noProof = math.MinInt64

func newFreshness(bound time.Duration) *freshness {
	f := &freshness{bound: bound, epoch: time.Now()}
	f.provenAt.Store(noProof)
	return f
}

// proven records a read sent at sent whose answer matched the snapshot.
// Proof never moves back: an answer that arrives late does not undo a newer
// one.
func (f *freshness) proven(sent time.Time) {
	at := int64(sent.Sub(f.epoch))
	for {
		old := f.provenAt.Load()
		if at <= old || f.provenAt.CompareAndSwap(old, at) {
			return
		}
	}
}

// age is how old the newest proof is at now, and false without one.
func (f *freshness) age(now time.Time) (time.Duration, bool) {
	at := f.provenAt.Load()
	if at == noProof {
		return 0, false
	}
	return now.Sub(f.epoch) - time.Duration(at), true
}

// fresh reports whether proof younger than the bound is held now.
func (f *freshness) fresh() bool {
	age, ok := f.age(time.Now())
	return ok && age < f.bound
}

// period is how often a consistent read is sent: the latency it tolerates
// before the proof lapses is bound - period.
func (f *freshness) period() time.Duration { return f.bound / 2 }

// prover keeps the proof fresh while the monitor follows the FeatureGate:
// one consistent read each period, each bounded by the bound (an answer
// later than that proves nothing that is still true). A read that finds the
// FeatureGate changed ends it: the comparison has asked for the stop.
type prover struct {
	*freshness
	read    func(context.Context) (*configv1.FeatureGate, error)
	compare func(context.Context, *configv1.FeatureGate) bool
	log     logr.Logger
	name    string
	// lapses counts each lapse; nil counts nothing.
	lapses prometheus.Counter

	// lapsedAt is when the proof last lapsed, zero while it holds; it
	// outlives one run, as a lapse may outlive the watch it started under.
	lapsedAt time.Time
}

// errNoAnswer is a consistent read unanswered within the bound.
var errNoAnswer = errors.New("no answer")

type proof struct {
	sent time.Time
	fg   *configv1.FeatureGate
	err  error
}

// errLapsed ends the monitor's follow when the proof lapsed: the watch it
// follows may be as dead as the reads, and reading again on a new
// connection is the way back.
var errLapsed = errors.New("freshness proof lapsed")

// run proves until ctx ends, a read finds a change (it returns nil then:
// the comparison asked for the stop), or the proof lapses (errLapsed).
func (p *prover) run(ctx context.Context) error {
	results := make(chan proof, 1)
	send := func() {
		sent := time.Now()
		go func() {
			rctx, cancel := context.WithTimeout(ctx, p.bound)
			defer cancel()
			fg, err := p.read(rctx)
			if err != nil && rctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w to a consistent read of FeatureGate %s within %s", errNoAnswer, p.name, p.bound)
			}
			results <- proof{sent: sent, fg: fg, err: err}
		}()
	}
	next := time.NewTimer(p.period())
	defer next.Stop()
	inFlight := false
	lapse := time.NewTimer(p.untilLapse())
	defer lapse.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next.C:
			if !inFlight {
				inFlight = true
				send()
			}
		case r := <-results:
			inFlight = false
			next.Reset(max(time.Until(r.sent.Add(p.period())), 0))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			switch {
			case errors.Is(r.err, errNotFound):
				// A consistent read answered that it is gone: proof too,
				// of the state the guard keeps its snapshot through.
			case r.err != nil:
				lastErr = r.err
				continue
			case p.compare(ctx, r.fg):
				return nil
			}
			p.proven(r.sent)
			lastErr = nil
			p.recovered()
			lapse.Reset(p.untilLapse())
		case now := <-lapse.C:
			if p.fresh() {
				lapse.Reset(p.untilLapse())
				continue
			}
			if p.lapsedAt.IsZero() {
				p.lapsedAt = now
				if p.lapses != nil {
					p.lapses.Inc()
				}
				reason := "no consistent read answered yet"
				switch {
				case lastErr != nil:
					reason = lastErr.Error()
				case inFlight:
					reason = fmt.Sprintf("no answer to a consistent read of FeatureGate %s yet", p.name)
				}
				age, _ := p.age(now)
				p.log.Info("FeatureGate not proven current within the freshness bound; not current", "featureGate", p.name,
					"bound", p.bound.String(), "provenAgo", age.Round(time.Millisecond).String(), "reason", reason)
			}
			return errLapsed
		}
	}
}

// recovered logs the end of a lapse, once proof is held again.
func (p *prover) recovered() {
	if p.lapsedAt.IsZero() || !p.fresh() {
		return
	}
	p.log.Info("FeatureGate proven current again", "featureGate", p.name,
		"lapsedFor", time.Since(p.lapsedAt).Round(time.Millisecond).String())
	p.lapsedAt = time.Time{}
}

// untilLapse is how long the proof held now lasts; a short wait when none
// is held, so that its absence is logged.
func (f *freshness) untilLapse() time.Duration {
	age, ok := f.age(time.Now())
	if !ok {
		return f.bound
	}
	return max(f.bound-age, time.Millisecond)
}
