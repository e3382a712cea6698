package featuregate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/testharness"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// countingGetter counts the reads that pass through it.
type countingGetter struct {
	featuregate.Getter
	reads atomic.Int32
}

func (c *countingGetter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Getter.Get(ctx, key, obj, opts...)
}

// lines collects the messages a logr.Logger is given.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, args)
	}, funcr.Options{})
}

func (l *lines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.all {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

func liveCounting(t *testing.T, cfg *rest.Config) *countingGetter {
	t.Helper()
	lg, err := featuregate.NewLiveGetter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &countingGetter{Getter: lg}
}

// A refused connection is retried on a short fixed interval, not the
// backoff, and logged once, not per attempt.
func TestStartupRetriesRefusedConnectionsQuicklyAndQuietly(t *testing.T) {
	g := NewWithT(t)
	reader := liveCounting(t, closedPortConfig(t))
	var log lines
	s := featuregate.NewStartup(reader, featuregate.Options{BackoffCap: 2 * time.Second, Logger: log.logger()})
	runStartup(t, s)

	g.Eventually(reader.reads.Load).WithTimeout(30*time.Second).Should(BeNumerically(">=", 10),
		"a backoff capped at 2s would have read about 4 times by now")
	g.Expect(log.count(`"FeatureGate not read; no feature set assumed, retrying"`)).To(Equal(1), "one line for the same failure, until logEvery")
	g.Expect(checkMessage(s)()).To(ContainSubstring("connection refused"))
}

// A server that answers, even with an error, gets the exponential backoff.
func TestStartupBacksOffFromServerErrors(t *testing.T) {
	g := NewWithT(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "etcd is unhappy", http.StatusInternalServerError)
	}))
	t.Cleanup(server.Close)
	reader := liveCounting(t, &rest.Config{Host: server.URL})
	s := featuregate.NewStartup(reader, featuregate.Options{BackoffCap: 2 * time.Second})
	runStartup(t, s)

	// 100 ms, 200 ms, 400 ms, 800 ms, then 2 s: at most 5 reads in the
	// first 1.5 s (fewer on a slow machine, never more).
	g.Eventually(reader.reads.Load).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 2))
	g.Consistently(reader.reads.Load).WithTimeout(1500 * time.Millisecond).Should(BeNumerically("<=", 6))
}

// Retry-After is honoured, up to the cap.
func TestStartupHonoursRetryAfterUpToTheCap(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var at []time.Time
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	}))
	t.Cleanup(server.Close)
	s := featuregate.NewStartup(liveCounting(t, &rest.Config{Host: server.URL}), featuregate.Options{BackoffCap: time.Second})
	runStartup(t, s)

	times := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
	g.Eventually(func() int { return len(times()) }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 3))
	ts := times()
	for i := 1; i < len(ts); i++ {
		// Not the 100 ms backoff, not the 30 s asked for: the 1 s cap.
		g.Expect(ts[i].Sub(ts[i-1])).To(BeNumerically(">=", 900*time.Millisecond), "read %d", i)
	}
}

// A starting kube-apiserver holds its first requests and answers later ones
// at once: a read sent beside a held one wins.
func TestStartupHedgesAHeldRead(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	name := uniqueName()
	testharness.CreateSharedFeatureGate(t, apiReader(t, cp.Config), newFG(name, "TechPreviewNoUpgrade"))
	live := liveCounting(t, cp.Config)
	held := &holdFirst{Getter: live, release: make(chan struct{})}
	t.Cleanup(func() { close(held.release) })
	s := featuregate.NewStartup(held, featuregate.Options{Name: name, BackoffCap: 10 * time.Second})
	started := time.Now()
	runStartup(t, s)

	g.Eventually(s.Taken()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Expect(time.Since(started)).To(BeNumerically("<", 5*time.Second), "the held read (bounded at 10 s) was waited out")
	g.Expect(held.calls.Load()).To(BeNumerically(">=", 2), "a second read was sent beside the held one")
}

// holdFirst holds the first read until released or cancelled.
type holdFirst struct {
	featuregate.Getter
	release chan struct{}
	calls   atomic.Int32
}

func (h *holdFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if h.calls.Add(1) == 1 {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Getter.Get(ctx, key, obj, opts...)
}

// A kube-apiserver that is starting answers at once that its paths are not
// installed yet: that is read again as soon as a refused connection would be,
// so the snapshot follows its readiness closely.
func TestStartupRetriesAStartingAPIServerQuickly(t *testing.T) {
	g := NewWithT(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,` +
			`"message":"the request has been made before all known HTTP paths have been installed, please try again"}`))
	}))
	t.Cleanup(server.Close)
	reader := liveCounting(t, &rest.Config{Host: server.URL})
	s := featuregate.NewStartup(reader, featuregate.Options{BackoffCap: 2 * time.Second})
	runStartup(t, s)

	g.Eventually(reader.reads.Load).WithTimeout(30*time.Second).Should(BeNumerically(">=", 10),
		"a backoff capped at 2s would have read about 4 times by now")
	g.Expect(checkMessage(s)()).To(ContainSubstring("HTTP paths have been installed"))
}
