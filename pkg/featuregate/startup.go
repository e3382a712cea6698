package featuregate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
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
	reader     getter
	name       string
	view       View
	backoffCap time.Duration
	timeout    time.Duration
	onSnapshot func(Snapshot)
	// announce is called once the snapshot is published (readiness first;
	// Events may take a round trip).
	announce func(context.Context, Snapshot)
	log      logr.Logger

	mu      sync.Mutex
	snap    *Snapshot
	lastErr error
	taken   chan struct{}
}

// newStartup reads through r, which must be live: the manager's cache may
// not be running yet, and must not decide this.
func newStartup(r getter, o Options, announce func(context.Context, Snapshot)) *startup {
	log := o.Logger
	if log.GetSink() == nil {
		log = ctrllog.Log.WithName("featuregate")
	}
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	return &startup{
		reader:     r,
		name:       name,
		view:       o.view(),
		backoffCap: orDefault(o.BackoffCap, DefaultBackoffCap),
		timeout:    o.InitialFetchTimeout,
		onSnapshot: o.OnSnapshot,
		announce:   announce,
		log:        log,
		taken:      make(chan struct{}),
	}
}

var _ manager.LeaderElectionRunnable = &startup{}

// NeedLeaderElection is false: every replica owns its own snapshot.
func (s *startup) NeedLeaderElection() bool { return false }

// Start reads until a snapshot is taken, ctx ends, or the timeout passes.
func (s *startup) Start(ctx context.Context) error {
	backoff := wait.Backoff{Duration: initialBackoff, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: s.backoffCap}
	var deadline <-chan time.Time
	if s.timeout > 0 {
		t := time.NewTimer(s.timeout)
		defer t.Stop()
		deadline = t.C
	}
	started := time.Now()
	attemptLimit := max(s.backoffCap, time.Second)
	for attempt := 1; ; attempt++ {
		snap, err := s.readOnce(ctx, started, attemptLimit)
		if err == nil {
			s.log.Info("Startup snapshot taken", "featureGate", s.name, "featureSet", snap.FeatureSetName(),
				"snapshot", snap.String(), "attempts", attempt)
			if s.onSnapshot != nil {
				s.onSnapshot(snap)
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
			// A slow server gets longer next time; a starting one, a fresh
			// request instead of one it holds.
			attemptLimit = min(2*attemptLimit, attemptTimeout)
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		delay := min(backoff.Step(), s.backoffCap)
		s.log.Info("FeatureGate not read; no feature set assumed, retrying", "featureGate", s.name,
			"attempt", attempt, "retryIn", delay.String(), "error", err.Error())
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

func (s *startup) readOnce(ctx context.Context, started time.Time, limit time.Duration) (Snapshot, error) {
	if s.timeout > 0 {
		limit = max(min(limit, s.timeout-time.Since(started)), time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return s.read(ctx)
}

func (s *startup) read(ctx context.Context) (Snapshot, error) {
	fg := &configv1.FeatureGate{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: s.name}, fg); err != nil {
		return Snapshot{}, describeReadError(s.name, err)
	}
	snap, err := New(fg, s.view)
	if err != nil {
		return Snapshot{}, fmt.Errorf("FeatureGate %s: %w", s.name, err)
	}
	if err := snap.Complete(); err != nil {
		return Snapshot{}, fmt.Errorf("FeatureGate %s has %w yet", s.name, err)
	}
	return snap, nil
}

// describeReadError tells an absent object from an absent API: both leave us
// without a snapshot, but they call for different fixes. Without the CRD the
// API server answers a bare "404 page not found", which client-go turns into
// a NotFound that also names the object, marked UnexpectedServerResponse.
func describeReadError(name string, err error) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse) &&
		errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name == name:
		return fmt.Errorf("FeatureGate %s not found", name)
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return fmt.Errorf("FeatureGate API not served (is the config.openshift.io CRD installed?): %w", err)
	default:
		return fmt.Errorf("get FeatureGate %s: %w", name, err)
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
	switch {
	case s.snap != nil:
		return nil
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
