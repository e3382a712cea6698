package featuregate

import (
	"context"
	"sync"
)

// stopper ends the manager when asked, so that a fresh process takes a fresh
// snapshot. It is a Runnable that runs on every replica: a standby's
// snapshot is as stale as the leader's.
type stopper struct {
	mu        sync.Mutex
	reason    string
	settle    func(context.Context)
	requested chan struct{}
	// cancel cancels the context the manager was started with.
	cancel context.CancelFunc
}

func newStopper() *stopper { return &stopper{requested: make(chan struct{})} }

// NeedLeaderElection is false: the stopper must run on standbys too.
func (s *stopper) NeedLeaderElection() bool { return false }

// Stop asks for a graceful shutdown, and reports whether this call did: only
// the first reason is kept. The request takes effect at once (Requested is
// closed, so work stops); the manager's context is cancelled once settle
// returns (at once when nil).
func (s *stopper) Stop(reason string, settle func(context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.requested:
		return false
	default:
	}
	s.reason = reason
	s.settle = settle
	close(s.requested)
	return true
}

// Requested is closed once Stop has been called. Work that acts on the
// snapshot stops when it closes.
func (s *stopper) Requested() <-chan struct{} { return s.requested }

// Reason returns the first reason given to Stop, and whether Stop was called.
func (s *stopper) Reason() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.requested:
		return s.reason, true
	default:
		return "", false
	}
}

// starting records the cancel function of the context the manager is
// started with.
func (s *stopper) starting(cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
}

// Start waits for a stop request, lets it settle, and then cancels the
// manager's context; the manager drains its runnables within its
// GracefulShutdownTimeout.
func (s *stopper) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.requested:
	}
	s.mu.Lock()
	settle, cancel := s.settle, s.cancel
	s.mu.Unlock()
	if settle != nil {
		settle(ctx)
	}
	if cancel != nil {
		cancel()
	}
	return nil
}
