package featuregate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

const (
	// initialBackoff is the wait after the first failed read.
	initialBackoff = 100 * time.Millisecond
	// attemptTimeout is the most one read may take. The first reads are
	// bounded by the backoff cap (at least 1 s), doubling after each that
	// times out: a kube-apiserver that is starting holds early requests for
	// seconds while later ones are answered at once, and an API that drops
	// packets must not hold an attempt, or the timeout, hostage.
	attemptTimeout = 10 * time.Second
)

// startup takes the startup snapshot. It is a manager Runnable so that it
// reads inside the manager's lifecycle, with the health probes already
// answering, and it keeps reading until it succeeds: it never assumes a
// feature set it did not read.
type startup struct {
	src     source
	name    string
	version string
	// parts are read with the FeatureGate, each into the snapshot.
	parts []part
	// versions, when set, resolves the version to read (a placeholder
	// Version is the ClusterVersion's); nil: version as given.
	versions   *versionResolver
	backoffCap time.Duration
	timeout    time.Duration
	// announce is called once the snapshot is published (readiness first;
	// an Event may take a round trip): recordSnapshot, with events and
	// metrics.
	announce func(context.Context, Snapshot)
	events   eventWriter
	metrics  metrics
	// taking, when set, looks at the FeatureGate a snapshot is taken from
	// before it is published (entryCheck).
	taking func(*configv1.FeatureGate, Snapshot, time.Time)
	log    logr.Logger

	// versionFrom says where the snapshot's version came from.
	versionFrom string
	// warnAfter is how long the reads may fail before their log line is
	// an error: a minute, when a human should look.
	warnAfter time.Duration
	// readinessServed is whether a probe address serves /readyz; the
	// waiting line says it, as nothing else shows the wait then.
	readinessServed bool

	mu      sync.Mutex
	snap    *Snapshot
	lastErr error
	taken   chan struct{}
	// read is the FeatureGate the snapshot was taken from and when its
	// read was sent, until the monitor takes it as its first view.
	read *sentRead
}

// sentRead is a consistent read's answer and when it was sent.
type sentRead struct {
	fg   *configv1.FeatureGate
	sent time.Time
}

// takeRead returns the read the snapshot was taken from, once: the
// monitor's first view, so that a starting process reads the FeatureGate
// once, not twice in the same millisecond.
func (s *startup) takeRead() (*sentRead, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.read
	s.read = nil
	return r, r != nil
}

// newStartup reads through src, which must be live: the manager's cache may
// not be running yet, and must not decide this; the ClusterVersion, when
// the version is the placeholder, through cfg. o has its defaults.
func newStartup(src source, parts []part, cfg *rest.Config, o Options, events eventWriter, m metrics) (*startup, error) {
	versions, err := newVersionResolver(cfg, o)
	if err != nil {
		return nil, err
	}
	s := &startup{
		src:        src,
		parts:      parts,
		name:       o.Name,
		version:    o.Version,
		versions:   versions,
		backoffCap: o.BackoffCap,
		timeout:    o.InitialFetchTimeout,
		events:     events,
		metrics:    m,
		log:        o.Logger,
		taken:      make(chan struct{}),
		warnAfter:  unreadWarnAfter,
	}
	s.announce = s.recordSnapshot
	return s, nil
}

// recordSnapshot counts and records the snapshot just published.
func (s *startup) recordSnapshot(ctx context.Context, snap Snapshot) {
	s.metrics.startupFeatureSet.WithLabelValues(snap.FeatureSetName()).Set(1)
	ref := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: s.name}}
	s.events.record(ctx, reference(ref), corev1.EventTypeNormal, reasonStartupSnapshot, "Snapshot", "Startup feature set "+snap.String()+versionNote(snap, s.versionFrom))
}

var _ manager.LeaderElectionRunnable = &startup{}

// NeedLeaderElection is false: every replica owns its own snapshot.
func (s *startup) NeedLeaderElection() bool { return false }

// Start reads until a snapshot is taken, ctx ends, or the timeout passes.
//
// How soon it reads again depends on who said no. A refused connection
// costs the API server nothing, and the API may be back any moment: retry
// after dialRetryInterval; so too while a starting kube-apiserver says its
// paths are not installed yet. An answer from a server (5xx, 429, a timeout)
// means it is there but struggling: back off, exponentially up to the cap,
// and never sooner than its Retry-After (itself bounded by the cap).
func (s *startup) Start(ctx context.Context) error {
	backoff := s.newBackoff()
	var deadline <-chan time.Time
	if s.timeout > 0 {
		t := time.NewTimer(s.timeout)
		defer t.Stop()
		deadline = t.C
	}
	started := time.Now()
	attemptLimit := max(s.backoffCap, time.Second)
	var quiet quietLog
	warned := false
	for attempt := 1; ; attempt++ {
		// A manager started with its context already ended (a test's, or
		// a SIGTERM during the start) reads nothing: a read with a done
		// context still dials, and the connection it dials is pooled
		// after Start returned, where nothing closes it.
		if ctx.Err() != nil {
			return nil
		}
		// Hedging only once a read failed: that says the server may be
		// starting (it holds its first requests); before that a slow answer
		// says it is busy, and two reads would make it busier (sixty
		// processes restarting at once send three times the reads).
		snap, err := s.readOnce(ctx, started, attemptLimit, attempt > 1)
		if err == nil {
			s.log.Info("Startup snapshot taken", "featureGate", s.name, "featureSet", snap.FeatureSetName(),
				"snapshot", snap.String(), "version", snap.Version(), "versionFrom", s.versionFrom, "attempts", attempt)
			for _, p := range s.parts {
				if n, ok := p.(takenNoter); ok {
					v, _ := snap.valueOf(p.key())
					n.noteTaken(s.log, v)
				}
			}
			if s.taking != nil {
				s.mu.Lock()
				read := s.read
				s.mu.Unlock()
				if read != nil {
					s.taking(read.fg, snap, time.Now())
				}
			}
			s.publish(snap)
			if s.announce != nil {
				s.announce(ctx, snap)
			}
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// A slow server gets longer next time.
			attemptLimit = min(2*attemptLimit, attemptTimeout)
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		var delay time.Duration
		if soon, ok := retrySoon(err); ok {
			delay = soon
			backoff = s.newBackoff()
		} else {
			delay = min(backoff.Step(), s.backoffCap)
			if seconds, ok := apierrors.SuggestsClientDelay(err); ok {
				delay = max(delay, min(time.Duration(seconds)*time.Second, s.backoffCap))
			}
		}
		loud := time.Since(started) >= s.warnAfter
		if failures, ok := quiet.dueOr(err, time.Now(), loud && !warned); ok {
			warned = warned || loud
			msg := "FeatureGate not read; no feature set assumed, retrying"
			kv := []any{"featureGate", s.name, "attempt", attempt, "failures", failures, "retryIn", delay.String(),
				"waited", time.Since(started).Round(time.Second).String(), "readinessServed", s.readinessServed}
			if unread := new(partUnreadError); errors.As(err, &unread) {
				msg = "Snapshot part not read; nothing assumed, retrying"
				if l, ok := unread.part.(unreadLiner); ok {
					msg = l.unreadLine()
				}
				kv = append(kv, "part", unread.part.what())
			}
			if !loud {
				s.log.Info(msg, append(kv, "error", err.Error())...)
			} else {
				// Nothing may be watching readiness: say it louder.
				s.log.Error(err, msg, kv...)
			}
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-deadline:
			timer.Stop()
			return fmt.Errorf("no FeatureGate snapshot after %s (initial fetch timeout): %w", s.timeout, err)
		case <-timer.C:
		}
	}
}

const (
	// dialRetryInterval is the wait after a read that reached no server.
	dialRetryInterval = 50 * time.Millisecond
	// cacheRetryInterval is the wait after a read a just-started server
	// refused while its watch cache initializes (isCacheInitializing).
	cacheRetryInterval = 100 * time.Millisecond
	// hedgeAfter is how long a read may go unanswered before another is
	// sent beside it: a kube-apiserver that is starting holds its first
	// requests for seconds and answers later ones at once.
	hedgeAfter = 100 * time.Millisecond
	// maxReadsInFlight bounds those reads.
	maxReadsInFlight = 3
	// logEvery is how often an unchanged failure is logged again.
	logEvery = 5 * time.Second
	// unreadWarnAfter is how long startup reads fail before they are
	// logged as errors.
	unreadWarnAfter = time.Minute
)

func (s *startup) newBackoff() wait.Backoff {
	return wait.Backoff{Duration: initialBackoff, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: s.backoffCap}
}

// isDialError reports whether err never reached a server.
func isDialError(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// isStarting reports whether err is a kube-apiserver still installing its
// paths: it answers every request at once, before doing any work, until it
// is ready, so waiting a backoff step would only wait past its readiness.
func isStarting(err error) bool {
	return apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "before all known HTTP paths have been installed")
}

// retrySoon is how soon to read again after err when the server cost
// nothing to ask (it was not reached, or answered at once that it is
// starting): a short fixed wait, not the backoff; ok is false otherwise.
// The startup read and the monitor both ask it.
func retrySoon(err error) (time.Duration, bool) {
	switch {
	case isDialError(err) || isStarting(err):
		return dialRetryInterval, true
	case isCacheInitializing(err):
		return cacheRetryInterval, true
	}
	return 0, false
}

// isCacheInitializing reports whether err is a kube-apiserver whose watch
// cache for FeatureGates is not ready yet, for a short while: a consistent
// list waits for that cache, and a just-started server answers it at once
// with "storage is (re)initializing" and a Retry-After that stays 1 s for
// the first ten seconds or so of its downtime (and grows after). The check
// costs the server nothing, and the cache is usually ready within
// milliseconds: waiting out the whole second would make readiness trail
// the API's return by a second. A longer Retry-After (a cache whose etcd
// has been gone for a while) is honoured as any other.
func isCacheInitializing(err error) bool {
	seconds, ok := apierrors.SuggestsClientDelay(err)
	return apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "storage is (re)initializing") && ok && seconds <= 1
}

// quietLog keeps a retry loop's log readable: the first failure, any
// failure that differs from the last one logged, and then one line every
// logEvery, saying how many failures it stands for.
type quietLog struct {
	last     string
	at       time.Time
	failures int
}

func (q *quietLog) due(err error, now time.Time) (failures int, ok bool) {
	return q.dueOr(err, now, false)
}

// dueOr is due, or due at once when force is true.
func (q *quietLog) dueOr(err error, now time.Time, force bool) (failures int, ok bool) {
	q.failures++
	if msg := err.Error(); force || msg != q.last || now.Sub(q.at) >= logEvery {
		failures, q.failures = q.failures, 0
		q.last, q.at = msg, now
		return failures, true
	}
	return 0, false
}

// readOnce is one bounded attempt at the snapshot, hedged when hedge is
// set.
func (s *startup) readOnce(ctx context.Context, started time.Time, limit time.Duration, hedge bool) (Snapshot, error) {
	if s.timeout > 0 {
		limit = max(min(limit, s.timeout-time.Since(started)), time.Millisecond)
	}
	version := releaseVersion{version: s.version, from: "option"}
	if s.versions != nil {
		vctx, cancel := context.WithTimeout(ctx, limit)
		v, err := s.versions.resolve(vctx)
		cancel()
		if err != nil {
			return Snapshot{}, err
		}
		version = v
	}
	sent := time.Now()
	fg, err := hedgedRead(ctx, s.src.read, limit, hedge)
	if err != nil {
		return Snapshot{}, err
	}
	snap, err := Read(fg, version.version)
	if err != nil {
		return Snapshot{}, err
	}
	for _, p := range s.parts {
		pctx, cancel := context.WithTimeout(ctx, limit)
		v, err := p.take(pctx)
		cancel()
		if err != nil {
			return Snapshot{}, &partUnreadError{part: p, err: err}
		}
		snap.parts = append(snap.parts, partValue{key: p.key(), value: v})
	}
	s.versionFrom = version.from
	s.mu.Lock()
	s.read = &sentRead{fg: fg, sent: sent}
	s.mu.Unlock()
	return snap, nil
}

// hedgedRead is one read bounded by limit, and, when hedge is set, beside
// it another each hedgeAfter it goes unanswered (up to maxReadsInFlight): a
// kube-apiserver that is starting holds its first requests for seconds and
// answers later ones at once. The first read that succeeds wins; the
// attempt fails once all have failed.
func hedgedRead(ctx context.Context, read func(context.Context) (*configv1.FeatureGate, error), limit time.Duration, hedge bool) (*configv1.FeatureGate, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type result struct {
		fg  *configv1.FeatureGate
		err error
	}
	results := make(chan result, maxReadsInFlight)
	send := func() {
		go func() {
			fg, err := read(ctx)
			results <- result{fg, err}
		}()
	}
	send()
	inFlight, sent := 1, 1
	hedges := time.NewTicker(hedgeAfter)
	defer hedges.Stop()
	for {
		select {
		case r := <-results:
			inFlight--
			if r.err == nil || inFlight == 0 {
				return r.fg, r.err
			}
		case <-hedges.C:
			if hedge && sent < maxReadsInFlight {
				send()
				inFlight++
				sent++
			}
		}
	}
}

func (s *startup) publish(snap Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil {
		return // taken already; the first snapshot is the startup snapshot
	}
	s.snap = &snap
	s.lastErr = nil
	close(s.taken)
}

// Snapshot returns the startup snapshot once it has been taken.
func (s *startup) Snapshot() (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return Snapshot{}, false
	}
	return *s.snap, true
}

// Taken is closed when the snapshot has been taken.
func (s *startup) Taken() <-chan struct{} { return s.taken }

// Check is a healthz.Checker for /readyz: not ready until the snapshot
// exists, saying why.
func (s *startup) Check(_ *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unread := new(partUnreadError)
	switch {
	case s.snap != nil:
		return nil
	case errors.As(s.lastErr, &unread):
		return fmt.Errorf("initial %s not read yet: %w", unread.part.what(), s.lastErr)
	case s.lastErr != nil:
		return fmt.Errorf("initial FeatureGate not read yet: %w", s.lastErr)
	default:
		return errors.New("initial FeatureGate not read yet")
	}
}

// AfterSnapshot returns r started only once the snapshot is taken. Anything
// that acts on the snapshot, and any controller whose cache-sync timeout
// would otherwise run out during a long API outage at start, goes through
// here. Leader election is r's own choice.
func (s *startup) AfterSnapshot(r manager.Runnable) manager.Runnable {
	return &afterSnapshot{taken: s.taken, runnable: r}
}

type afterSnapshot struct {
	taken    <-chan struct{}
	runnable manager.Runnable
}

func (a *afterSnapshot) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.taken:
	}
	return a.runnable.Start(ctx)
}

func (a *afterSnapshot) NeedLeaderElection() bool {
	if le, ok := a.runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}
