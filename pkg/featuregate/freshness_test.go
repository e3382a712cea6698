package featuregate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

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

	held := time.Now()
	hold.Store(true)
	var lapsed time.Time
	g.Eventually(func() bool {
		lapsed = time.Now()
		return gd.guard.Current()
	}).WithPolling(5*time.Millisecond).WithTimeout(5*time.Second).Should(BeFalse(), "Current with no read answered")
	g.Expect(lapsed.Sub(held)).To(BeNumerically("<=", bound+150*time.Millisecond), "Current outlived the bound")
	line, _, err := gd.log.Wait(testContext(t), 0, logLapsed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line.Get("reason")).To(ContainSubstring(noAnswerTo))
	g.Expect(line.Get("bound")).To(Equal("600ms"))
	g.Consistently(gd.guard.Current).WithTimeout(2*time.Second).Should(BeFalse(), "Current while no read is answered")
	g.Expect(gd.log.CountWhere(logLapsed)).To(Equal(1), "a lapse is logged once")
	g.Expect(metric(t, gd.reg, "featuregate_guard_freshness_lapses_total", "")).To(Equal(1.0), "and counted once")

	released := time.Now()
	hold.Store(false)
	g.Eventually(gd.guard.Current).WithPolling(5 * time.Millisecond).WithTimeout(5 * time.Second).Should(BeTrue())
	t.Logf("lapsed %s after the reads were held; current again %s after they were answered", lapsed.Sub(held), time.Since(released))
	_, _, err = gd.log.Wait(testContext(t), 0, logProven)
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
