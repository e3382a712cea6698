package librarygo_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	"github.com/openshift/library-go/pkg/operator/events"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
	"github.com/featuregate-operator/operator/pkg/featuregate/librarygo"
)

// What an adopter's code is typed on: library-go's interface, and the
// health check controllercmd's WithHealthChecks takes.
var (
	_ featuregates.FeatureGateAccess = &librarygo.Access{}
	_ healthz.HealthChecker          = &librarygo.Access{}
	_ healthz.HealthChecker          = &librarygo.Readiness{}
)

// shared is one control plane for the tests that need no outage of their
// own.
var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
		code = 1
	}
	os.Exit(code)
}

func sharedConfig(t *testing.T) *rest.Config {
	t.Helper()
	return shared.Get(t).Config
}

var names atomic.Int32

// uniqueName keeps tests on one control plane out of each other's way.
func uniqueName() string { return fmt.Sprintf("cluster-%d", names.Add(1)) }

// named reads the FeatureGate name instead of "cluster".
func named(name string) librarygo.Option {
	return librarygo.WithGuardOptions(func(o *featuregate.Options) { o.Name = name })
}

// changes records what the change handler is called with.
type changes struct {
	mu      sync.Mutex
	history []featuregates.FeatureChange
}

func (c *changes) handle(fc featuregates.FeatureChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, fc)
}

func (c *changes) get() []featuregates.FeatureChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]featuregates.FeatureChange(nil), c.history...)
}

// running is an Access run until the test ends, as a controllercmd
// operator runs it: go Run(ctx).
type running struct {
	*librarygo.Access
	changes  *changes
	recorder events.InMemoryRecorder
	done     chan struct{}
}

func run(t *testing.T, cfg *rest.Config, desired, marker string, opts ...librarygo.Option) *running {
	t.Helper()
	recorder := events.NewInMemoryRecorder("librarygo-test", clocktesting.NewFakePassiveClock(time.Now()))
	a, err := librarygo.NewFeatureGateAccess(cfg, desired, marker, recorder, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{Access: a, changes: &changes{}, recorder: recorder, done: make(chan struct{})}
	a.SetChangeHandler(r.changes.handle)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(r.done)
		a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its context's end")
		}
	})
	return r
}

// observed waits for InitialFeatureGatesObserved, as the idiom library-go's
// doc comment recommends does (with a shorter bound).
func (r *running) observed(t *testing.T) {
	t.Helper()
	select {
	case <-r.InitialFeatureGatesObserved():
	case <-time.After(30 * time.Second):
		t.Fatalf("InitialFeatureGatesObserved not closed within 30 s; readiness says: %v", r.Check(nil))
	}
}

// waitChanges waits until the handler has been called n times.
func (r *running) waitChanges(t *testing.T, n int) []featuregates.FeatureChange {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() int { return len(r.changes.get()) }).
		WithTimeout(30*time.Second).WithPolling(10*time.Millisecond).
		Should(gomega.BeNumerically(">=", n), "calls of the change handler")
	return r.changes.get()
}

func reasons(r events.InMemoryRecorder) []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}
