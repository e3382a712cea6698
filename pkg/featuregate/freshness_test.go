package featuregate_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// Log lines of the freshness proof.
var (
	logLapsed  = testenv.Message("FeatureGate not proven current within the freshness bound; not current")
	logProven  = testenv.Message("FeatureGate proven current again")
	noAnswerTo = "no answer to a consistent read of FeatureGate"
)

// The guard vouches only on proof younger than its bound. Reads that go
// unanswered (a silent link, a frozen API server and one cut off from etcd
// look alike from here) turn Current false within the bound although the
// watch is still open; the lapse is logged once with its reason, and the
// next answer restores Current without a stop.
func TestGuardCurrentNeedsFreshProof(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	const bound = 600 * time.Millisecond
	var hold atomic.Bool
	gd := startGuarded(t, featuregate.Options{Name: name, FreshnessBound: bound}, func(gu *featuregate.Guard) {
		featuregate.WrapMonitorRead(gu, func(read featuregate.ReadFunc) featuregate.ReadFunc {
			return func(ctx context.Context) (*configv1.FeatureGate, error) {
				if hold.Load() {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return read(ctx)
			}
		})
	})
	gd.current(t)
	g.Consistently(gd.guard.Current).WithTimeout(2*time.Second).WithPolling(10*time.Millisecond).Should(BeTrue(),
		"answered reads keep the proof fresh")

	line, held, lapsed := lapsesWithin(t, gd, &hold, bound)
	g.Expect(line.Get("reason")).To(ContainSubstring(noAnswerTo))
	g.Expect(line.Get("bound")).To(Equal("600ms"))
	g.Consistently(gd.guard.Current).WithTimeout(2*time.Second).Should(BeFalse(), "Current while no read is answered")
	g.Expect(gd.log.CountWhere(logLapsed)).To(Equal(1), "a lapse is logged once")
	g.Expect(metric(t, gd.reg, "featuregate_guard_freshness_lapses_total", "")).To(Equal(1.0), "and counted once")

	released := time.Now()
	hold.Store(false)
	g.Eventually(gd.guard.Current).WithPolling(5 * time.Millisecond).WithTimeout(5 * time.Second).Should(BeTrue())
	t.Logf("lapsed %s after the reads were held; current again %s after they were answered", lapsed.Sub(held), time.Since(released))
	_, _, err := gd.log.Wait(testContext(t), 0, logProven)
	g.Expect(err).NotTo(HaveOccurred())
	gd.noStop(t)
}

// The freshness reads compare what they read: a change that the watch does
// not deliver (here it is deaf) is seen within a period or so, detected by
// "freshness".
func TestGuardFreshnessReadSeesAChange(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := newGuard(t, featuregate.Options{Name: name, FreshnessBound: time.Second})
	featuregate.DeafenMonitor(gd.guard)
	g.Expect(featuregate.StartStartup(ctx, gd.guard)).To(Succeed())
	done := startMonitor(t, gd.guard)
	gd.current(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	changed := time.Now()
	g.Expect(gd.stopRequested(t)).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(time.Since(changed)).To(BeNumerically("<", 2*time.Second), "a read every half bound sees the change")
	g.Expect(gd.stopLine(t).Get("detectedBy")).To(Equal("freshness"))
	g.Expect(gd.guard.Current()).To(BeFalse())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

// Proof costs a consistent read each half bound; the guard pays it only
// while something relies on Current. A guard nobody asks stops reading
// within the demand window, its proof ages without a lapse (no line, no
// count), and the first ask after that waits for one read and answers true.
// An ask while reads go unanswered answers false within half the bound, and
// the lapse is then logged as before: the demand is what it vouches for.
func TestGuardProvesOnlyWhileAsked(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	const bound = 400 * time.Millisecond
	demandWindow := featuregate.DemandBounds * bound
	var reads atomic.Int64
	var hold atomic.Bool
	gd := startGuarded(t, featuregate.Options{Name: name, FreshnessBound: bound}, func(gu *featuregate.Guard) {
		featuregate.WrapMonitorRead(gu, func(read featuregate.ReadFunc) featuregate.ReadFunc {
			return func(ctx context.Context) (*configv1.FeatureGate, error) {
				reads.Add(1)
				if hold.Load() {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return read(ctx)
			}
		})
	})
	gd.current(t)
	asking := reads.Load()
	g.Consistently(gd.guard.Current).WithTimeout(2*time.Second).WithPolling(10*time.Millisecond).Should(BeTrue(),
		"a caller that keeps asking keeps the proof")
	g.Expect(reads.Load()-asking).To(BeNumerically(">=", 4), "reads every half bound while asked")

	// Nobody asks: reads stop within the window and a period.
	quietFrom := time.Now()
	var before int64
	g.Eventually(func() bool {
		n := reads.Load()
		stopped := n == before
		before = n
		return stopped
	}).WithPolling(demandWindow/2+bound).WithTimeout(demandWindow+10*bound).Should(BeTrue(), "reads go on with nobody asking")
	g.Expect(time.Since(quietFrom)).To(BeNumerically(">=", demandWindow), "reads stopped before the demand window ended")
	g.Consistently(reads.Load).WithTimeout(4 * bound).Should(Equal(before))
	g.Expect(gd.log.CountWhere(logLapsed)).To(BeZero(), "proof nobody relies on lapsed")
	g.Expect(metric(t, gd.reg, "featuregate_guard_freshness_lapses_total", "")).To(BeZero())

	// The first asks wake the prover and wait for one read: every one of
	// them, not only the one that woke it (requests arriving together).
	asked := time.Now()
	answers := make(chan bool, 4)
	for range cap(answers) {
		go func() { answers <- gd.guard.Current() }()
	}
	for range cap(answers) {
		g.Expect(<-answers).To(BeTrue(), "an ask after a quiet spell waits for the read its demand sent")
	}
	g.Expect(time.Since(asked)).To(BeNumerically("<", bound/2), "the first asks waited longer than a read")
	g.Expect(reads.Load()).To(BeNumerically(">", before))

	// Quiet again, then asked while reads go unanswered.
	g.Eventually(func() bool {
		n := reads.Load()
		stopped := n == before
		before = n
		return stopped
	}).WithPolling(demandWindow/2 + bound).WithTimeout(demandWindow + 10*bound).Should(BeTrue())
	hold.Store(true)
	asked = time.Now()
	g.Expect(gd.guard.Current()).To(BeFalse(), "answered without proof")
	waited := time.Since(asked)
	g.Expect(waited).To(BeNumerically(">=", bound/2-10*time.Millisecond), "gave up before half the bound")
	g.Expect(waited).To(BeNumerically("<", bound), "waited past half the bound")
	g.Consistently(gd.guard.Current).WithTimeout(2 * bound).Should(BeFalse())
	line, _, err := gd.log.Wait(testContext(t), 0, logLapsed)
	g.Expect(err).NotTo(HaveOccurred(), "an unanswered demand lapses")
	g.Expect(line.Get("reason")).To(ContainSubstring(noAnswerTo))
	hold.Store(false)
	g.Eventually(gd.guard.Current).WithPolling(5 * time.Millisecond).WithTimeout(5 * time.Second).Should(BeTrue())
	gd.noStop(t)
}

// lapsesWithin sets hold, which holds the guard's reads unanswered, and
// expects Current false within bound (and a little more for the test's
// polling): it returns the lapse's log line, when hold was set, and when
// Current was first seen false.
func lapsesWithin(t *testing.T, gd *guarded, hold *atomic.Bool, bound time.Duration) (line testenv.Line, held, lapsed time.Time) {
	t.Helper()
	g := NewWithT(t)
	held = time.Now()
	hold.Store(true)
	g.Eventually(func() bool {
		lapsed = time.Now()
		return gd.guard.Current()
	}).WithPolling(5*time.Millisecond).WithTimeout(5*time.Second).Should(BeFalse(), "Current with no read answered")
	g.Expect(lapsed.Sub(held)).To(BeNumerically("<=", bound+150*time.Millisecond), "Current outlived the bound")
	line, _, err := gd.log.Wait(testContext(t), 0, logLapsed)
	g.Expect(err).NotTo(HaveOccurred())
	return line, held, lapsed
}

// holding is cfg whose requests to a path containing path go unanswered
// (until their context ends) while hold is set: a silent link to one
// object.
func holding(cfg *rest.Config, path string, hold *atomic.Bool) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if hold.Load() && strings.Contains(req.URL.Path, path) {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}
