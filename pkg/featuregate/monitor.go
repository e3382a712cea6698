package featuregate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// monitor is what lets the guard vouch for its snapshot after start. It
// reads the FeatureGate live, compares, then follows the source (a watch
// from that read, or the file) and compares every state it sees. Only while
// it follows is the view current: Guard.Current answers false from the
// moment it loses track (a watch ends, the API is in trouble, the file
// vanishes) until a new read has been compared and the source is followed
// again, and besides it holds proof with a deadline (see freshness). While
// it cannot read it retries every retryInterval, or every dialRetryInterval
// while no server answers, so a change made during an outage, or just after
// it, is seen within about that long of being readable, whatever
// client-go's backoff would do.
type monitor struct {
	src        source
	name       string
	alarm      alarm
	comparison *comparison
	log        logr.Logger
	// prover keeps the proof with a deadline that Current needs besides a
	// followed source.
	prover *prover
	// parts are checked after each read of the FeatureGate, and followed
	// with it.
	parts []part

	current atomic.Bool
}

func newMonitor(src source, parts []part, name string, a alarm, c *comparison, bound time.Duration, log logr.Logger) *monitor {
	m := &monitor{src: src, parts: parts, name: name, alarm: a, comparison: c, log: log}
	m.prover = &prover{
		freshness: newFreshness(bound),
		// Through m.src, not src: tests hook the monitor's source.
		read:    func(ctx context.Context) (*configv1.FeatureGate, error) { return m.src.read(ctx) },
		compare: func(ctx context.Context, fg *configv1.FeatureGate) bool { return c.compare(ctx, fg, "freshness") },
		parts:   parts,
		held:    c.startup.Snapshot,
		lapses:  c.metrics.freshnessLapses,
		name:    name,
		log:     log,
	}
	return m
}

// reconnect renews the connections of every read the proof needs.
func (m *monitor) reconnect() {
	m.src.reconnect()
	for _, p := range m.parts {
		p.reconnect()
	}
}

// checkParts reads and compares every part, as the prover does, within
// the bound.
func (m *monitor) checkParts(ctx context.Context) (changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.prover.bound)
	defer cancel()
	snap, _ := m.comparison.startup.Snapshot()
	return checkParts(ctx, m.parts, snap, "verify", func(int) {})
}

// NeedLeaderElection is false: every replica guards its own snapshot.
func (m *monitor) NeedLeaderElection() bool { return false }

// first is the read the startup snapshot was taken from, once, when it is
// still proof at now (younger than half the bound): the monitor's first
// view, instead of a second read, unless the caller saw an alarm.
func (m *monitor) first(now time.Time) (*sentRead, bool) {
	if m.comparison.startup == nil {
		return nil, false
	}
	r, ok := m.comparison.startup.takeRead()
	if !ok || now.Sub(r.sent) >= m.prover.bound/2 {
		return nil, false
	}
	return r, true
}

// Start reads and follows until ctx ends or a change is found.
func (m *monitor) Start(ctx context.Context) error {
	defer m.current.Store(false)
	var quiet quietLog
	lost := false
	for ctx.Err() == nil {
		m.current.Store(false)
		// Trouble seen before this read is this read's to settle: the
		// watch that follows it starts from what it read.
		alarmed := false
		select {
		case <-m.alarm:
			alarmed = true
		default:
		}
		sent := time.Now()
		var fg *configv1.FeatureGate
		var err error
		if r, ok := m.first(sent); ok && !alarmed {
			// The startup read, less than half the bound old: compared
			// already (it is the snapshot), proof as of when it was sent,
			// and where the watch starts.
			fg, sent = r.fg, r.sent
		} else if fg, err = hedgedRead(ctx, m.src.read, time.Second, lost); errors.Is(err, errNotFound) {
			// Deleted: the FeatureGate controller reports it, and the
			// snapshot is all there is (a new process could not read one
			// either). Watch from now on, to see it come back.
			fg, err = &configv1.FeatureGate{}, nil
		} else if err == nil && m.comparison.compare(ctx, fg, "verify") {
			return nil
		}
		if err == nil && len(m.parts) > 0 {
			// The rest of the snapshot is proven with it, or not at all.
			changed, perr := m.checkParts(ctx)
			if changed {
				return nil
			}
			err = perr
		}
		if err != nil {
			lost = true
			if errors.Is(err, context.DeadlineExceeded) {
				// Unanswered: the connection may be the trouble (a silent
				// link, a frozen API server, one cut off from etcd that
				// still answers pings); the next read dials afresh.
				m.reconnect()
			}
			// A read that reached no server costs it nothing: read again
			// soon, so that a change made during an outage is seen as soon
			// as the API answers again, as the startup read does.
			wait := retryInterval
			if soon, ok := retrySoon(err); ok {
				wait = soon
			}
			if failures, ok := quiet.due(err, time.Now()); ok {
				m.log.Info("FeatureGate not read; its view is not current, retrying", "featureGate", m.name,
					"failures", failures, "retryIn", wait.String(), "error", err.Error())
			}
			if !sleep(ctx, wait) {
				return nil
			}
			continue
		}
		// A consistent read answered (the object, or that it is gone):
		// proof as of when it was sent.
		m.prover.proven(sent)
		m.prover.recovered()
		if lost {
			m.log.Info("FeatureGate read again; its view is current", "featureGate", m.name, "resourceVersion", fg.ResourceVersion)
			lost, quiet = false, quietLog{}
		}
		started := time.Now()
		err = m.follow(ctx, fg)
		if ctx.Err() != nil || m.comparison.stopped() {
			return nil
		}
		if errors.Is(err, errLapsed) {
			lost = true
			m.reconnect() // logged by the prover
		} else if err != nil {
			lost = true
			m.log.Info("FeatureGate view not current; reading it again", "featureGate", m.name, "reason", err.Error())
		}
		// A source that fails at once must not spin.
		if wait := retryInterval - time.Since(started); wait > 0 && !sleep(ctx, wait) {
			return nil
		}
	}
	return nil
}

// follow follows the source until it loses track or the alarm is raised:
// a failed request of the manager may be the first sign of an outage that
// has not ended the watch yet. Beside it the prover keeps the proof fresh,
// and a change its reads find ends it too.
func (m *monitor) follow(ctx context.Context, from *configv1.FeatureGate) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Neither goroutine outlives follow: the next read's view is the only
	// one that may mark the monitor current.
	defer func() {
		cancel()
		wg.Wait()
		m.current.Store(false)
	}()
	done := make(chan error, 2+len(m.parts))
	// The view is current once every follower is certain to see a change.
	var waiting atomic.Int32
	waiting.Store(int32(1 + len(m.parts)))
	following := func() {
		if waiting.Add(-1) == 0 {
			m.current.Store(true)
		}
	}
	wg.Add(2 + len(m.parts))
	go func() {
		defer wg.Done()
		if err := m.prover.run(ctx); ctx.Err() == nil {
			done <- err // nil: a change, and the comparison asked for the stop
		}
	}()
	go func() {
		defer wg.Done()
		done <- m.src.follow(ctx, from, sync.OnceFunc(following), func(fg *configv1.FeatureGate) bool {
			changed := m.comparison.compare(ctx, fg, "verify")
			if changed {
				m.current.Store(false)
			}
			return changed
		})
	}()
	snap, _ := m.comparison.startup.Snapshot()
	for _, p := range m.parts {
		held, _ := snap.valueOf(p.key())
		go func() {
			defer wg.Done()
			// nil ends follow as a change does, or as a watch that reached
			// its timeout (the monitor reads again).
			changed, err := p.follow(ctx, held, sync.OnceFunc(following))
			if changed {
				m.current.Store(false)
			}
			if ctx.Err() == nil {
				done <- err
			}
		}()
	}
	select {
	case err := <-done:
		return err
	case <-m.alarm:
		return errAlarm
	}
}

// Current reports whether the source is followed now, on proof younger than
// the freshness bound. Each call is a demand for proof; calls that find the
// prover woken by a demand after a quiet spell wait for its read (see
// freshness).
func (m *monitor) Current() bool {
	now := time.Now()
	m.prover.ask(now)
	if !m.current.Load() {
		return false
	}
	return m.prover.awaitFresh(now) && m.current.Load()
}

var errAlarm = errors.New("a request or watch of the manager failed")

// sleep waits d, or less if ctx ends: it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// alarm is raised whenever the manager's requests or watches fail: the API
// may be in trouble, and the monitor's own watch may not have noticed yet.
type alarm chan struct{}

func newAlarm() alarm { return make(alarm, 1) }

func (a alarm) raise() {
	select {
	case a <- struct{}{}:
	default:
	}
}

// watchErrorHandler keeps next (client-go's logging, or the caller's own)
// and raises the alarm.
func (a alarm) watchErrorHandler(next toolscache.WatchErrorHandlerWithContext) toolscache.WatchErrorHandlerWithContext {
	if next == nil {
		next = toolscache.DefaultWatchErrorHandler
	}
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		next(ctx, r, err)
		a.raise()
	}
}

// wrapTransport raises the alarm whenever a request of the manager gets no
// answer (refused, reset, timed out): client-go's reflector retries a
// refused watch inside its own loop without telling the watch error handler,
// and a connection that stopped carrying packets may hold the monitor's
// watch open without events. Error answers are not trouble of this kind: a
// stopping API server ends the monitor's watch itself, and an aggregated API
// that answers 503 for ever must not keep the monitor from vouching.
func (a alarm) wrapTransport(rt http.RoundTripper) http.RoundTripper {
	return troubleTransport{next: rt, alarm: a}
}

type troubleTransport struct {
	next  http.RoundTripper
	alarm alarm
}

func (t troubleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		t.alarm.raise()
	}
	return resp, err
}

// WrappedRoundTripper lets client-go see through the wrapper, as it does
// through its own: closing idle connections once Start returns reaches
// the transport underneath.
func (t troubleTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
