package featuregate_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"go.uber.org/goleak"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// The core without a manager: not ready until the snapshot is taken, then
// Current, a change ends Run with nil and a reason, and nothing of the
// guard is left running after it.
func TestGuardRunsWithoutAManager(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	ignore := goleak.IgnoreCurrent()
	gd := newGuard(t, featuregate.Options{Name: name})
	g.Expect(gd.guard.Check(nil)).To(MatchError(ContainSubstring("initial FeatureGate not read yet")))

	done := make(chan error, 1)
	go func() { done <- gd.guard.Run(context.Background()) }()
	g.Eventually(func() error { return gd.guard.Check(nil) }).WithTimeout(time.Minute).Should(Succeed())
	gd.current(t)
	snap, _ := gd.guard.Snapshot()
	g.Expect(snap.FeatureSetName()).To(Equal("Default"))

	specUpdate(toTechPreview).apply(testContext(t), t, c, name)
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	reason, requested := gd.guard.StopReason()
	g.Expect(requested).To(BeTrue())
	g.Expect(reason).To(ContainSubstring("feature set changed from Default to TechPreviewNoUpgrade"))
	g.Expect(gd.guard.Current()).To(BeFalse())
	g.Eventually(func() error { return goleak.Find(ignore) }).WithTimeout(5*time.Second).Should(Succeed(), "left running after Run returned")
}

// Run ends when its context does, with nil and no stop requested.
func TestGuardRunEndsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := newGuard(t, featuregate.Options{Name: name})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gd.guard.Run(ctx) }()
	gd.taken(t)
	cancel()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	_, requested := gd.guard.StopReason()
	g.Expect(requested).To(BeFalse())
}

// A guard runs once: Run, or NewManager and its Start.
func TestGuardRunsOnce(t *testing.T) {
	g := NewWithT(t)
	gd := newGuard(t, featuregate.Options{Name: uniqueName()})
	gd.newManager(t, ctrl.Options{})
	g.Expect(gd.guard.Run(context.Background())).To(MatchError(ContainSubstring("already run or given to NewManager")))

	gd = newGuard(t, featuregate.Options{Name: uniqueName()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(gd.guard.Run(ctx)).To(Succeed())
	g.Expect(gd.guard.Run(ctx)).To(MatchError(ContainSubstring("already run")))
	_, err := gd.guard.NewManager(ctrl.Options{})
	g.Expect(err).To(MatchError(ContainSubstring("after Run")))

	gd = newGuard(t, featuregate.Options{Name: uniqueName(), TLSProfile: &featuregate.TLSProfileOptions{}})
	g.Expect(gd.guard.Run(ctx)).To(MatchError(ContainSubstring("serving the profile needs NewManager")))

	gd = newGuard(t, featuregate.Options{Name: uniqueName(), Setup: func(manager.Manager, featuregate.Snapshot) error { return nil }})
	g.Expect(gd.guard.Run(ctx)).To(MatchError(ContainSubstring("Setup builds on a manager")))
	// A refused Run leaves the guard to be used.
	_, err = gd.guard.NewManager(ctrl.Options{})
	g.Expect(err).NotTo(HaveOccurred())
}
