package featuregate

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// stopper ends the process's manager when asked, so that a fresh process
// takes a fresh snapshot. It is a Runnable that runs on every replica: a
// standby's snapshot is as stale as the leader's.
type stopper struct {
	cancel context.CancelFunc

	once      sync.Once
	mu        sync.Mutex
	reason    string
	requested chan struct{}
}

// newStopper returns a stopper that calls cancel, which must cancel the
// context given to the manager's Start.
func newStopper(cancel context.CancelFunc) *stopper {
	return &stopper{cancel: cancel, requested: make(chan struct{})}
}

var _ manager.LeaderElectionRunnable = &stopper{}

// NeedLeaderElection is false: the Stopper must run on standbys too.
func (s *stopper) NeedLeaderElection() bool { return false }

// Stop asks for a graceful shutdown. Only the first reason is kept; later
// calls do nothing.
func (s *stopper) Stop(reason string) {
	s.once.Do(func() {
		s.mu.Lock()
		s.reason = reason
		s.mu.Unlock()
		close(s.requested)
	})
}

// Requested is closed once Stop has been called. Work that acts on the
// snapshot stops when it closes.
func (s *stopper) Requested() <-chan struct{} { return s.requested }

// Reason returns the first reason given to Stop, and whether Stop was called.
func (s *stopper) Reason() (string, bool) {
	select {
	case <-s.requested:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.reason, true
	default:
		return "", false
	}
}

// Start waits for a stop request and then cancels the manager's context; the
// manager drains its runnables within its GracefulShutdownTimeout.
func (s *stopper) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.requested:
		s.cancel()
	}
	return nil
}
