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
	// InitialBackoff is the wait after the first failed read.
	InitialBackoff = 100 * time.Millisecond
	// DefaultBackoffCap bounds the wait between reads, and so how long after
	// the API returns the snapshot is taken.
	DefaultBackoffCap = 2 * time.Second
)

// Startup takes the startup snapshot. It is a manager Runnable so that it
// reads inside the manager's lifecycle, with the health probes already
// answering, and it keeps reading until it succeeds: it never assumes a
// feature set it did not read.
type Startup struct {
	reader Getter
	opts   Options

	// BackoffCap bounds the wait between reads; DefaultBackoffCap when zero.
	BackoffCap time.Duration
	// Timeout, when positive, makes Start fail after that long without a
	// snapshot, for those who prefer a crash loop to waiting.
	Timeout time.Duration
	// OnSnapshot, when set, is called once with the snapshot before it is
	// published (metrics, status).
	OnSnapshot func(Snapshot)
	// Log defaults to the controller-runtime logger named "featuregate".
	Log logr.Logger

	mu      sync.Mutex
	snap    *Snapshot
	lastErr error
	taken   chan struct{}
}

// NewStartup reads through r, which must be live (NewLiveGetter, or
// mgr.GetAPIReader()): the manager's cache may not be running yet, and must
// not decide this.
func NewStartup(r Getter, opts Options) *Startup {
	return &Startup{reader: r, opts: opts, taken: make(chan struct{})}
}

var _ manager.LeaderElectionRunnable = &Startup{}

// NeedLeaderElection is false: every replica owns its own snapshot.
func (s *Startup) NeedLeaderElection() bool { return false }

// Start reads until a snapshot is taken, ctx ends, or Timeout passes.
func (s *Startup) Start(ctx context.Context) error {
	log := s.Log
	if log.GetSink() == nil {
		log = ctrllog.Log.WithName("featuregate")
	}
	limit := s.BackoffCap
	if limit <= 0 {
		limit = DefaultBackoffCap
	}
	backoff := wait.Backoff{Duration: InitialBackoff, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: limit}
	var deadline <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	name := s.opts.ObjectName()
	started := time.Now()
	attemptLimit := max(limit, time.Second)
	for attempt := 1; ; attempt++ {
		snap, err := s.readOnce(ctx, started, attemptLimit)
		if err == nil {
			log.Info("startup feature set "+snap.String(), "featureGate", name, "featureSet", snap.FeatureSetName(), "attempts", attempt)
			if s.OnSnapshot != nil {
				s.OnSnapshot(snap)
			}
			s.publish(snap)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// A slow server gets longer next time; a starting one, a fresh
			// request instead of one it holds.
			attemptLimit = min(2*attemptLimit, AttemptTimeout)
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		delay := min(backoff.Step(), limit)
		log.Info("Error getting FeatureGate; no feature set assumed, retrying", "featureGate", name, "attempt", attempt, "retryIn", delay.String(), "error", err.Error())
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-deadline:
			timer.Stop()
			return fmt.Errorf("no FeatureGate snapshot after %s (--initial-fetch-timeout): %w", s.Timeout, err)
		case <-timer.C:
		}
	}
}

// AttemptTimeout is the most one read may take. The first reads are bounded
// by the backoff cap (at least 1 s), doubling after each that times out: a
// kube-apiserver that is starting holds early requests for seconds while
// later ones are answered at once, and an API that drops packets must not
// hold an attempt, or Timeout, hostage.
const AttemptTimeout = 10 * time.Second

func (s *Startup) readOnce(ctx context.Context, started time.Time, limit time.Duration) (Snapshot, error) {
	if s.Timeout > 0 {
		limit = max(min(limit, s.Timeout-time.Since(started)), time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return s.read(ctx)
}

func (s *Startup) read(ctx context.Context) (Snapshot, error) {
	name := s.opts.ObjectName()
	fg := &configv1.FeatureGate{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: name}, fg); err != nil {
		return Snapshot{}, describeReadError(name, err)
	}
	snap, err := New(fg, s.opts)
	if err != nil {
		return Snapshot{}, fmt.Errorf("FeatureGate %s: %w", name, err)
	}
	if err := snap.Complete(); err != nil {
		return Snapshot{}, fmt.Errorf("FeatureGate %s has %w yet", name, err)
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

func (s *Startup) publish(snap Snapshot) {
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
func (s *Startup) Snapshot() (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return Snapshot{}, false
	}
	return *s.snap, true
}

// Taken is closed when the snapshot has been taken.
func (s *Startup) Taken() <-chan struct{} { return s.taken }

// Check is a healthz.Checker for /readyz: not ready until the snapshot
// exists, saying why.
func (s *Startup) Check(_ *http.Request) error {
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
func (s *Startup) AfterSnapshot(r manager.Runnable) manager.Runnable {
	return &afterSnapshot{startup: s, runnable: r}
}

type afterSnapshot struct {
	startup  *Startup
	runnable manager.Runnable
}

func (a *afterSnapshot) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.startup.Taken():
	}
	return a.runnable.Start(ctx)
}

func (a *afterSnapshot) NeedLeaderElection() bool {
	if le, ok := a.runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}
