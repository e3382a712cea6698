package featuregate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// countingCancel stands for the cancel func of the manager's context.
type countingCancel struct{ calls atomic.Int32 }

func (c *countingCancel) cancel() { c.calls.Add(1) }

// runAsync runs start in a goroutine and returns where its result arrives.
func runAsync(ctx context.Context, start func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	return done
}

func TestStopperFirstReasonWins(t *testing.T) {
	g := NewWithT(t)
	var c countingCancel
	s := featuregate.NewStopper(c.cancel)

	reason, requested := s.Reason()
	g.Expect(requested).To(BeFalse())
	g.Expect(reason).To(BeEmpty())
	g.Expect(s.Requested()).NotTo(BeClosed())

	g.Expect(s.Stop("feature set changed from Default to TechPreviewNoUpgrade", nil)).To(BeTrue(), "the first Stop is the one that asked")
	g.Expect(s.Stop("second reason", nil)).To(BeFalse())
	g.Expect(s.Stop("", nil)).To(BeFalse())

	g.Expect(s.Requested()).To(BeClosed())
	reason, requested = s.Reason()
	g.Expect(requested).To(BeTrue())
	g.Expect(reason).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(c.calls.Load()).To(BeZero(), "only Start cancels")
}

// Reconciles on several goroutines may ask at once; exactly one reason is
// kept and nothing panics (run with -race to check the locking).
func TestStopperConcurrentStops(t *testing.T) {
	g := NewWithT(t)
	s := featuregate.NewStopper(func() {})
	reasons := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	start := make(chan struct{})
	done := make(chan string, len(reasons))
	for _, r := range reasons {
		go func() {
			<-start
			if s.Stop(r, nil) {
				done <- r
			} else {
				done <- ""
			}
		}()
	}
	close(start)
	var first []string
	for range reasons {
		if r := <-done; r != "" {
			first = append(first, r)
		}
	}
	g.Expect(first).To(HaveLen(1), "exactly one Stop reports that it asked")
	reason, requested := s.Reason()
	g.Expect(requested).To(BeTrue())
	g.Expect(reason).To(Equal(first[0]), "the reason kept is the one whose Stop asked")
}

func TestStopperStartCancelsOnceRequested(t *testing.T) {
	g := NewWithT(t)
	var c countingCancel
	s := featuregate.NewStopper(c.cancel)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, s.Start)

	g.Consistently(done).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "Start returned before any stop was requested")
	g.Expect(c.calls.Load()).To(BeZero())

	g.Expect(s.Stop("changed", nil)).To(BeTrue())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(c.calls.Load()).To(Equal(int32(1)))
	g.Expect(s.Stop("again", nil)).To(BeFalse())
	g.Expect(c.calls.Load()).To(Equal(int32(1)))
}

// A stop requested before Start runs still cancels as soon as it does.
func TestStopperStopBeforeStart(t *testing.T) {
	g := NewWithT(t)
	var c countingCancel
	s := featuregate.NewStopper(c.cancel)
	s.Stop("early", nil)
	g.Expect(s.Start(context.Background())).To(Succeed())
	g.Expect(c.calls.Load()).To(Equal(int32(1)))
}

// A stopper that was never given the manager's cancel (NewManager's Start
// gives it one) still ends its own Start on a request.
func TestStopperWithoutCancel(t *testing.T) {
	g := NewWithT(t)
	s := featuregate.NewStopper(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, s.Start)
	s.Stop("changed", nil)
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

// The manager ending for another reason (a signal) is not a requested stop.
func TestStopperStartReturnsOnContextDone(t *testing.T) {
	g := NewWithT(t)
	var c countingCancel
	s := featuregate.NewStopper(c.cancel)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s.Start)
	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(c.calls.Load()).To(BeZero())
	_, requested := s.Reason()
	g.Expect(requested).To(BeFalse())
}

// All three run on every replica: a standby's snapshot is as stale as the
// leader's, and a leader-election runnable never starts on a standby.
func TestRunnablesDoNotNeedLeaderElection(t *testing.T) {
	g := NewWithT(t)
	var stopper manager.LeaderElectionRunnable = featuregate.NewStopper(func() {})
	g.Expect(stopper.NeedLeaderElection()).To(BeFalse())
	var startup manager.LeaderElectionRunnable = featuregate.NewStartup(nil, featuregate.Options{})
	g.Expect(startup.NeedLeaderElection()).To(BeFalse())
	var monitor manager.LeaderElectionRunnable = &featuregate.Monitor{}
	g.Expect(monitor.NeedLeaderElection()).To(BeFalse())
}

// recordingRunnable notes whether it was started.
type recordingRunnable struct {
	started atomic.Bool
}

func (r *recordingRunnable) Start(ctx context.Context) error {
	r.started.Store(true)
	<-ctx.Done()
	return nil
}

type electedRunnable struct {
	recordingRunnable
	needLeaderElection bool
}

func (r *electedRunnable) NeedLeaderElection() bool { return r.needLeaderElection }

func TestAfterSnapshotForwardsNeedLeaderElection(t *testing.T) {
	g := NewWithT(t)
	startup := featuregate.NewStartup(nil, featuregate.Options{})
	for _, need := range []bool{true, false} {
		wrapped := startup.AfterSnapshot(&electedRunnable{needLeaderElection: need})
		le, ok := wrapped.(manager.LeaderElectionRunnable)
		g.Expect(ok).To(BeTrue())
		g.Expect(le.NeedLeaderElection()).To(Equal(need))
	}
	// A runnable with no opinion gets the manager's default: leader only.
	le, ok := startup.AfterSnapshot(&recordingRunnable{}).(manager.LeaderElectionRunnable)
	g.Expect(ok).To(BeTrue())
	g.Expect(le.NeedLeaderElection()).To(BeTrue())
}

// Without a snapshot the wrapped runnable never starts, and the wrapper ends
// cleanly with the manager. (That it starts once the snapshot is taken is
// proven against a real API server in startup_test.go.)
func TestAfterSnapshotDoesNotStartBeforeSnapshot(t *testing.T) {
	g := NewWithT(t)
	startup := featuregate.NewStartup(nil, featuregate.Options{})
	inner := &recordingRunnable{}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, startup.AfterSnapshot(inner).Start)
	g.Consistently(done).WithTimeout(200 * time.Millisecond).ShouldNot(Receive())
	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(inner.started.Load()).To(BeFalse())
}

// A stop that must settle (a feature-set change waiting for its status
// entry) is requested at once, so work stops, but cancels the manager only
// once it has settled.
func TestStopperCancelsOnceSettled(t *testing.T) {
	g := NewWithT(t)
	var c countingCancel
	s := featuregate.NewStopper(c.cancel)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, s.Start)
	settled := make(chan struct{})
	g.Expect(s.Stop("feature set changed", func(context.Context) { <-settled })).To(BeTrue())
	g.Expect(s.Requested()).To(BeClosed(), "work must stop at once")
	g.Consistently(c.calls.Load).WithTimeout(200*time.Millisecond).Should(BeZero(), "cancelled before the stop settled")
	close(settled)
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(c.calls.Load()).To(Equal(int32(1)))
}
