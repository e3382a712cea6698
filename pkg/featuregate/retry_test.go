package featuregate_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
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

// closedPortConfig points at a loopback port nothing listens on: an API
// server that is down.
func closedPortConfig(t *testing.T) *rest.Config {
	t.Helper()
	return &rest.Config{Host: "https://" + testenv.ClosedAddr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

func liveCounting(t *testing.T, cfg *rest.Config) *countingGetter {
	t.Helper()
	return &countingGetter{Getter: liveGetter(t, cfg)}
}

// A refused connection is retried on a short fixed interval, not the
// backoff, and logged once, not per attempt.
func TestStartupRetriesRefusedConnectionsQuicklyAndQuietly(t *testing.T) {
	g := NewWithT(t)
	reader := liveCounting(t, closedPortConfig(t))
	logger, log := testenv.NewLogger(t)
	s := featuregate.NewStartup(reader, featuregate.Options{BackoffCap: 2 * time.Second, Logger: logger})
	runStartup(t, s)

	g.Eventually(reader.reads.Load).WithTimeout(30*time.Second).Should(BeNumerically(">=", 10),
		"a backoff capped at 2s would have read about 4 times by now")
	// The retry line is the one with a retryIn.
	retries := log.CountWhere(testenv.All(testenv.HasKey("retryIn"), testenv.HasKey("attempt")))
	g.Expect(retries).To(Equal(1), "one line for the same failure, until logEvery")
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
	// An attempt the loaded machine answers late is hedged: reads less
	// than half a second after an attempt's first read are that attempt.
	// (Measured from the attempt's first read, not the previous read, so
	// that the 100, 200, 400 ms backoff cannot pass as one attempt.)
	attempts := func() []time.Time {
		var starts []time.Time
		for _, read := range times() {
			if len(starts) == 0 || read.Sub(starts[len(starts)-1]) >= 500*time.Millisecond {
				starts = append(starts, read)
			}
		}
		return starts
	}
	g.Eventually(func() int { return len(attempts()) }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 3))
	ts := attempts()
	for i := 1; i < len(ts); i++ {
		// Not the 100 ms backoff, not the 30 s asked for: the 1 s cap.
		g.Expect(ts[i].Sub(ts[i-1])).To(BeNumerically(">=", 900*time.Millisecond), "attempt %d", i)
	}
}

// A starting kube-apiserver refuses connections, then holds its first
// requests and answers later ones at once: once a read failed, a read sent
// beside a held one wins. A first read that has not failed is not hedged
// (a slow answer then says the server is busy, and a second read would
// make it busier): held, it costs one attempt's limit.
func TestStartupHedgesAHeldReadOnceAReadFailed(t *testing.T) {
	for _, tc := range []struct {
		name        string
		refuseFirst bool
		within      time.Duration
		calls       int32
	}{
		{"after a refused connection", true, 2 * time.Second, 3},
		{"on a first read", false, 6 * time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cp := sharedControlPlane(t)
			name := uniqueName()
			testenv.CreateFeatureGate(t, testenv.Client(t, cp.Config), newFG(name, configv1.TechPreviewNoUpgrade))
			live := liveCounting(t, cp.Config)
			held := &holdOne{Getter: live, refuseFirst: tc.refuseFirst, release: make(chan struct{})}
			t.Cleanup(func() { close(held.release) })
			// A 4 s cap: the first attempt's limit, which a held read
			// not hedged is waited out to.
			s := featuregate.NewStartup(held, featuregate.Options{Name: name, BackoffCap: 4 * time.Second})
			started := time.Now()
			runStartup(t, s)

			g.Eventually(s.Taken()).WithTimeout(30 * time.Second).Should(BeClosed())
			took := time.Since(started)
			g.Expect(took).To(BeNumerically("<", tc.within))
			g.Expect(held.calls.Load()).To(BeNumerically(">=", tc.calls))
			if !tc.refuseFirst {
				g.Expect(took).To(BeNumerically(">=", 4*time.Second), "the first read was hedged")
			}
		})
	}
}

// holdOne refuses the first read when refuseFirst is set, and holds the
// next one until released or cancelled.
type holdOne struct {
	featuregate.Getter
	refuseFirst bool
	release     chan struct{}
	calls       atomic.Int32
}

func (h *holdOne) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	n := h.calls.Add(1)
	if h.refuseFirst && n == 1 {
		return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	if held := map[bool]int32{true: 2, false: 1}[h.refuseFirst]; n == held {
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

// A stopping kube-apiserver answers 429 with Retry-After: 5. client-go
// would sleep and retry inside the one call; the guard's read returns at
// once, so that its own retries decide (and a change made around an outage
// is seen the moment the API answers).
func TestAPIReadDoesNotHonourRetryAfter(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "The apiserver is shutting down, please try again later.", http.StatusTooManyRequests)
	}))
	t.Cleanup(server.Close)
	read, err := featuregate.APIRead(&rest.Config{Host: server.URL}, "cluster")
	g.Expect(err).NotTo(HaveOccurred())

	started := time.Now()
	_, err = read(testContext(t))
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("get FeatureGate cluster"))
	g.Expect(calls.Load()).To(Equal(int32(1)))
	g.Expect(time.Since(started)).To(BeNumerically("<", 4*time.Second), "no Retry-After sleep")
}

// The guard's read tells an absent FeatureGate from an absent API, and
// reads what the API server holds.
func TestAPIReadReadsAndDescribes(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	name := uniqueName()
	fg := testenv.CreateFeatureGate(t, testenv.Client(t, cp.Config), newFG(name, configv1.TechPreviewNoUpgrade))

	read, err := featuregate.APIRead(cp.Config, name)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Spec.FeatureSet).To(Equal(configv1.TechPreviewNoUpgrade))
	g.Expect(got.UID).To(Equal(fg.UID))

	absent, err := featuregate.APIRead(cp.Config, uniqueName())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = absent(ctx)
	g.Expect(err).To(MatchError(HaveSuffix(" not found")))
	g.Expect(err.Error()).NotTo(ContainSubstring("CRD"))
}

// A wait nobody can see must not stay quiet: once the reads have failed for
// warnAfter (a minute) the waiting line is logged at error level, at once,
// and it says whether readiness is served.
func TestStartupWaitRisesToAnErrorLine(t *testing.T) {
	g := NewWithT(t)
	logger, log := testenv.NewLogger(t)
	s := featuregate.NewStartup(liveGetter(t, closedPortConfig(t)), featuregate.Options{Logger: logger})
	featuregate.SetWarnAfter(s, 500*time.Millisecond)
	runStartup(t, s)

	waiting := testenv.Message("FeatureGate not read; no feature set assumed, retrying")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, at, err := log.Wait(ctx, 0, waiting)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.IsError()).To(BeFalse(), "the first minute is info: %s", first)
	loud, _, err := log.Wait(ctx, at+1, waiting)
	g.Expect(err).NotTo(HaveOccurred(), "no error line within logEvery after warnAfter: %s", log)
	g.Expect(loud.IsError()).To(BeTrue(), "after warnAfter the line is an error: %s", loud)
	g.Expect(loud.Get("readinessServed")).To(Equal("false"))
	g.Expect(loud.Get("error")).To(ContainSubstring("connection refused"))
}

// A just-started kube-apiserver answers the consistent list with "storage
// is (re)initializing" and Retry-After: 1 until its watch cache is ready,
// usually milliseconds later: the startup reads again after 100 ms, not
// the second, so that readiness follows the API's return closely. The
// wait is read from the waiting line (retryIn), not timed.
func TestStartupRetriesAnInitializingWatchCacheQuickly(t *testing.T) {
	g := NewWithT(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,` +
			`"message":"storage is (re)initializing","details":{"retryAfterSeconds":1}}`))
	}))
	t.Cleanup(server.Close)
	logger, log := testenv.NewLogger(t)
	s := featuregate.NewStartup(liveCounting(t, &rest.Config{Host: server.URL}), featuregate.Options{BackoffCap: 2 * time.Second, Logger: logger})
	runStartup(t, s)

	waiting := testenv.Message("FeatureGate not read; no feature set assumed, retrying")
	g.Eventually(func() bool { _, ok := log.Find(waiting); return ok }).WithTimeout(30 * time.Second).Should(BeTrue())
	line, _ := log.Find(waiting)
	g.Expect(line.Get("retryIn")).To(Equal("100ms"), "%s", line)
	g.Expect(line.Get("error")).To(ContainSubstring("storage is (re)initializing"))
}
