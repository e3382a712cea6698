package featuregate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
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
//
// Proof is kept only while something relies on it: a consistent read a
// second per replica is most of what an idle guard costs the control plane,
// and an operator that asks nothing of Current acts on nothing it would
// vouch for. Each Current call is a demand; the prover stops reading once
// none came for demandBounds bounds, and the calls that find it so wait for
// the one read their demand sends, rather than answer false for want of a
// proof nobody asked for.
type freshness struct {
	bound time.Duration
	// epoch makes proof times monotonic: they are durations since it.
	epoch time.Time
	// provenAt is when the newest proof's read was sent, as time since
	// epoch; noProof before the first.
	provenAt atomic.Int64
	// askedAt is when Current last asked, as time since epoch; noProof
	// before the first ask.
	askedAt atomic.Int64
	// dormant is set while the prover sends no reads for want of demand;
	// wake carries the ask that ends it, at wokeAt (time since epoch).
	dormant atomic.Bool
	wake    chan struct{}
	wokeAt  atomic.Int64

	mu sync.Mutex
	// next is closed by the next proof; nil until someone waits for it.
	next chan struct{}
}

const noProof = math.MinInt64

// demandBounds is how many freshness bounds the prover keeps proving after
// the last ask: a caller that asks in bursts (a reconcile, its writes) finds
// proof held throughout, and only a caller quiet for this long pays one
// read's wait at its next ask.
const demandBounds = 5

func newFreshness(bound time.Duration) *freshness {
	f := &freshness{bound: bound, epoch: time.Now(), wake: make(chan struct{}, 1)}
	f.provenAt.Store(noProof)
	f.askedAt.Store(noProof)
	f.wokeAt.Store(noProof)
	return f
}

// since is t as time since epoch.
func (f *freshness) since(t time.Time) int64 { return int64(t.Sub(f.epoch)) }

// proven records a read sent at sent whose answer matched the snapshot.
// Proof never moves back: an answer that arrives late does not undo a newer
// one.
func (f *freshness) proven(sent time.Time) {
	at := f.since(sent)
	for {
		old := f.provenAt.Load()
		if at <= old {
			return
		}
		if f.provenAt.CompareAndSwap(old, at) {
			break
		}
	}
	f.mu.Lock()
	if f.next != nil {
		close(f.next)
		f.next = nil
	}
	f.mu.Unlock()
}

// nextProof is closed by the next proof recorded.
func (f *freshness) nextProof() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = make(chan struct{})
	}
	return f.next
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

// ask records a demand for proof at now and wakes a dormant prover. The
// demand is kept to a quarter period, so that callers asking all the time
// do not all write it: the window it opens is many periods long.
func (f *freshness) ask(now time.Time) {
	at := f.since(now)
	if last := f.askedAt.Load(); last == noProof || at-last > int64(f.period()/4) {
		f.askedAt.Store(at)
	}
	if f.dormant.Load() {
		// Every caller that saw it dormant marks the wake, not only the
		// one that ends it, so that none finds an old mark and answers
		// false while the read is on its way.
		f.wokeAt.Store(at)
		if !f.dormant.CompareAndSwap(true, false) {
			return
		}
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// demanded reports whether Current asked within the demand window at now.
func (f *freshness) demanded(now time.Time) bool {
	at := f.askedAt.Load()
	return at != noProof && now.Sub(f.epoch)-time.Duration(at) < demandBounds*f.bound
}

// awaitFresh waits for fresh proof while the prover was woken less than a
// period before now (by this caller's ask or another's): the read the wake
// sent, which an API server that answers at all answers in a round trip.
// Otherwise it answers at once: a prover that is proving needs no wait,
// and one whose reads go unanswered must not make every caller wait.
func (f *freshness) awaitFresh(now time.Time) bool {
	if f.fresh() {
		return true
	}
	woke := f.wokeAt.Load()
	if woke == noProof {
		return false
	}
	left := time.Duration(woke) + f.period() - now.Sub(f.epoch)
	if left <= 0 {
		return false
	}
	next := f.nextProof()
	t := time.NewTimer(left)
	defer t.Stop()
	for !f.fresh() {
		select {
		case <-next:
			next = f.nextProof()
		case <-t.C:
			return false
		}
	}
	return true
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
	// parts are read beside each FeatureGate read, one consistent read
	// each, compared with the snapshot's values (held): proof needs every
	// read answered, and a part found changed ends the run as a changed
	// FeatureGate does.
	parts []part
	held  func() (Snapshot, bool)
	log   logr.Logger
	name  string
	// unanswered marks the reads of the proof in flight not answered yet:
	// bit 0 the FeatureGate's, bit i+1 parts[i]'s.
	unanswered atomic.Uint64
	// lapses counts each lapse; nil counts nothing.
	lapses prometheus.Counter

	// lapsedAt is when the proof last lapsed, zero while it holds; it
	// outlives one run, as a lapse may outlive the watch it started under.
	lapsedAt time.Time
}

// fgRead is the FeatureGate's read among prover.unanswered's bits.
const fgRead uint64 = 1

// errNoAnswer is a consistent read unanswered within the bound.
var errNoAnswer = errors.New("no answer")

type proof struct {
	sent time.Time
	fg   *configv1.FeatureGate
	err  error
	// changed: a part's read found it changed.
	changed bool
}

// errLapsed ends the monitor's follow when the proof lapsed: the watch it
// follows may be as dead as the reads, and reading again on a new
// connection is the way back.
var errLapsed = errors.New("freshness proof lapsed")

// run proves until ctx ends, a read finds a change (it returns nil then:
// the comparison asked for the stop), or the proof lapses (errLapsed).
// While nothing asks Current it sends nothing (dormant): proof that grows
// old then is no lapse, as nobody relies on it.
func (p *prover) run(ctx context.Context) error {
	results := make(chan proof, 1)
	send := func() {
		sent := time.Now()
		go func() {
			rctx, cancel := context.WithTimeout(ctx, p.bound)
			defer cancel()
			p.unanswered.Store(1<<(len(p.parts)+1) - 1)
			var changed bool
			var partErr error
			partsDone := make(chan struct{})
			if len(p.parts) == 0 {
				close(partsDone)
			} else {
				go func() {
					defer close(partsDone)
					snap, _ := p.held() // the prover runs once the snapshot is taken
					changed, partErr = checkParts(rctx, p.parts, snap, "freshness", func(i int) { p.unanswered.And(^(uint64(1) << (i + 1))) })
				}()
			}
			fg, err := p.read(rctx)
			p.unanswered.And(^fgRead)
			if err != nil && rctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w to a consistent read of FeatureGate %s within %s", errNoAnswer, p.name, p.bound)
			}
			<-partsDone
			if partErr != nil && (err == nil || errors.Is(err, errNotFound)) {
				err = partErr
			}
			results <- proof{sent: sent, fg: fg, err: err, changed: changed}
		}()
	}
	next := time.NewTimer(p.period())
	defer next.Stop()
	inFlight := false
	// demandSince is when the current spell of demand began: a proof
	// older than that was nobody's to keep, so the lapse is counted from
	// the later of the two.
	demandSince := time.Now()
	lapse := time.NewTimer(p.untilLapse(demandSince))
	defer lapse.Stop()
	defer p.dormant.Store(false)
	// asleep is set while dormant, from the pause until the wake is
	// received: no lapse is counted meanwhile, although an ask may already
	// have made the proof demanded again.
	asleep := false
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			if inFlight {
				// Its reads end with ctx; a change it found is reported
				// (its Event registered with the writer) before the
				// monitor returns and the manager's Start flushes.
				<-results
			}
			return ctx.Err()
		case <-p.wake:
			asleep = false
			demandSince = time.Now()
			lapse.Reset(p.untilLapse(demandSince))
			if !inFlight {
				inFlight = true
				send()
			}
		case now := <-next.C:
			if !p.demanded(now) {
				asleep = p.sleepUntilAsked()
				continue
			}
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
			case r.changed:
				return nil // the comparison asked for the stop
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
			lapse.Reset(p.untilLapse(demandSince))
		case now := <-lapse.C:
			if p.fresh() {
				lapse.Reset(p.untilLapse(demandSince))
				continue
			}
			if asleep || !p.demanded(now) {
				// Nobody relies on the proof: its age is no trouble. Look
				// again a period on, as demand may resume without a wake.
				lapse.Reset(p.period())
				continue
			}
			if now.Sub(demandSince) < p.bound {
				lapse.Reset(p.untilLapse(demandSince))
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
					reason = fmt.Sprintf("no answer to a consistent read of %s yet", p.unansweredObject())
				}
				age, _ := p.age(now)
				p.log.Info("FeatureGate not proven current within the freshness bound; not current", "featureGate", p.name,
					"bound", p.bound.String(), "provenAgo", age.Round(time.Millisecond).String(), "reason", reason)
			}
			return errLapsed
		}
	}
}

// checkParts reads every part at once, each compared with the snapshot's
// value (detectedBy says who asked), and calls answered(i) as parts[i]'s
// read is answered: changed when one found its part changed (the stop is
// requested), else the first error. The prover runs it beside its
// FeatureGate read; the monitor after its own.
func checkParts(ctx context.Context, parts []part, snap Snapshot, detectedBy string, answered func(i int)) (changed bool, err error) {
	type result struct {
		changed bool
		err     error
	}
	results := make([]result, len(parts))
	var wg sync.WaitGroup
	for i, pt := range parts {
		held, _ := snap.valueOf(pt.key())
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].changed, results[i].err = pt.check(ctx, held, detectedBy)
			answered(i)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.changed {
			return true, nil
		}
		if err == nil {
			err = r.err
		}
	}
	return false, err
}

// unansweredObject names an object whose read of the proof in flight is
// not answered yet, the FeatureGate first.
func (p *prover) unansweredObject() string {
	u := p.unanswered.Load()
	if u&fgRead != 0 || len(p.parts) == 0 {
		return "FeatureGate " + p.name
	}
	for i, pt := range p.parts {
		if u&(uint64(1)<<(i+1)) != 0 {
			return pt.object()
		}
	}
	return "FeatureGate " + p.name
}

// sleepUntilAsked marks the prover dormant, and reports whether it is: the
// next ask wakes it through p.wake. An ask that raced the mark is not lost:
// either it saw the mark and sent the wake, or the mark sees its demand and
// sends the wake itself.
func (p *prover) sleepUntilAsked() bool {
	p.dormant.Store(true)
	if !p.demanded(time.Now()) {
		p.log.V(1).Info("Freshness proof paused; nothing asked Current", "featureGate", p.name,
			"quietFor", (demandBounds * p.bound).String())
		return true
	}
	if p.dormant.CompareAndSwap(true, false) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return false
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

// untilLapse is how long the proof held now lasts, counted from no earlier
// than since (when the demand began); a short wait when none is held, so
// that its absence is logged.
func (f *freshness) untilLapse(since time.Time) time.Duration {
	age, ok := f.age(time.Now())
	if bySince := time.Since(since); !ok || bySince < age {
		age, ok = bySince, true
	}
	if !ok {
		return f.bound
	}
	return max(f.bound-age, time.Millisecond)
}
