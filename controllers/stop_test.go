package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// recordingClient records when each apply request starts, and holds the
// one named hold until its context ends.
type recordingClient struct {
	client.Client
	hold    string
	holding chan struct{}

	mu     sync.Mutex
	starts []time.Time
	ended  error
}

func (r *recordingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	r.mu.Lock()
	r.starts = append(r.starts, time.Now())
	r.mu.Unlock()
	if u, ok := obj.(interface{ GetName() string }); ok && u.GetName() == r.hold {
		close(r.holding)
		<-ctx.Done()
		r.mu.Lock()
		r.ended = ctx.Err()
		r.mu.Unlock()
		return ctx.Err()
	}
	return r.Client.Apply(ctx, obj, opts...)
}

// Nothing is applied after a stop is requested: the request in flight is
// cancelled, no other request starts, later run levels never run, and the
// run is not reported as failed.
func TestApplyNothingAfterStop(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a_held.yaml": configMap("held"),
		"0000_10_b.yaml":      configMap("same-level"),
		"0000_20_c.yaml":      configMap("later-level"),
	})
	rc := &recordingClient{Client: c, hold: "held", holding: make(chan struct{})}
	fg := featuregatetest.New(configv1.Default)
	a := newApplier(c, guard, dir)
	a.Client, a.Gates, a.Parallelism = rc, fg, 1

	result := make(chan Run, 1)
	snap, _ := fg.Snapshot()
	go func() { result <- a.Apply(ctx, snap) }()
	g.Eventually(rc.holding).WithTimeout(30 * time.Second).Should(BeClosed())
	stopAt := time.Now()
	fg.Change("feature set changed from Default to TechPreviewNoUpgrade")
	var run Run
	g.Eventually(result).WithTimeout(30 * time.Second).Should(Receive(&run))

	g.Expect(run.Aborted).To(BeTrue())
	g.Expect(run.Applied).To(BeEmpty())
	g.Expect(run.Failed).To(BeEmpty(), "what the stop cut short is not a failure")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g.Expect(rc.ended).To(MatchError(context.Canceled), "the request in flight is cancelled")
	for _, started := range rc.starts {
		g.Expect(started).To(BeTemporally("<", stopAt), "no request starts after the stop")
	}
	for _, name := range []string{"held", "same-level", "later-level"} {
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", name)).To(BeFalse(), name)
	}
}

// The ClusterOperator is restored as soon as it is deleted or overwritten,
// not at the next resync.
func TestClusterOperatorRestoredAtOnce(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	a := newApplier(e.c, e.guard, harness.WriteFiles(t, map[string]string{"0000_10_a.yaml": configMap("a")}))
	a.Cache, a.ResyncPeriod = e.mgr.GetCache(), time.Hour
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	})
	available := func() configv1.ClusterOperatorStatusCondition {
		co := &configv1.ClusterOperator{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Name: "featuregate-operator"}, co); err != nil {
			return configv1.ClusterOperatorStatusCondition{Message: err.Error()}
		}
		return condition(co, configv1.OperatorAvailable)
	}
	asExpected := And(HaveField("Status", configv1.ConditionTrue), HaveField("Reason", ReasonAsExpected))
	g.Eventually(available).WithTimeout(30 * time.Second).Should(asExpected)

	co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "featuregate-operator"}}
	g.Expect(e.c.Delete(e.ctx, co)).To(Succeed())
	g.Eventually(available).WithTimeout(10*time.Second).Should(asExpected, "restored after deletion")

	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(co), co)).To(Succeed())
	setCondition(&co.Status, configv1.OperatorAvailable, configv1.ConditionFalse, "Spoofed", "not really")
	g.Expect(e.c.Status().Update(e.ctx, co)).To(Succeed())
	g.Eventually(available).WithTimeout(10*time.Second).Should(asExpected, "restored after an overwrite")
	g.Expect(exists(e.ctx, e.c, &corev1.ConfigMap{}, "default", "a")).To(BeTrue())
}
