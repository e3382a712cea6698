package featuregate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// What a stock manager answers, the guarded one answers the same way (issue
// 40's table), against the real API server.

// No Config is an error at call time, as manager.New returns it, not a
// nil-pointer panic.
func TestNewGuardWithoutConfig(t *testing.T) {
	_, err := featuregate.NewGuard(nil, featuregate.Options{EventSource: "guard-test"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("must specify Config")))
}

// A process may build a guarded manager per test, as with ctrl.NewManager:
// the guard's own controllers do not make the second one fail on their
// names (the adopter's options keep name validation on).
func TestGuardedManagersPerProcess(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.Named(name)))
	for range 2 {
		gd := newGuard(t, featuregate.Options{Name: name})
		mgr, err := gd.guard.NewManager(ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		g.Expect(err).NotTo(HaveOccurred())
		gd.start(t, mgr)
		gd.taken(t)
	}
}

// GetConfig is the config the caller gave; an Options.NewClient that
// returns no client leaves GetClient nil, as a stock manager shows it.
func TestGuardedManagerConfigAndClientAsGiven(t *testing.T) {
	g := NewWithT(t)
	cfg := rest.CopyConfig(sharedControlPlane(t).Config)
	gd := newGuardOn(t, cfg, featuregate.Options{Name: uniqueName()})
	mgr, err := gd.guard.NewManager(ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		NewClient: func(*rest.Config, client.Options) (client.Client, error) { return nil, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mgr.GetConfig()).To(BeIdenticalTo(cfg))
	g.Expect(mgr.GetClient()).To(BeNil())
}

// A cleanup write after Start returned, no snapshot ever taken (the
// FeatureGate absent, SIGTERM), ends with an error at once: a stock
// manager's client would write; the guard's never writes unread, and must
// not hold the process for ever instead.
func TestGuardWriteAfterStopWithoutSnapshotEnds(t *testing.T) {
	g := NewWithT(t)
	name := uniqueName()
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{})
	ctx, sigterm := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	g.Consistently(func() bool { _, ok := gd.guard.Snapshot(); return ok }).WithTimeout(time.Second).Should(BeFalse())
	sigterm()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive())

	// The caller's context has no deadline, as in a cleanup path; the test
	// bounds it only so that today's failure is a failure, not a hang.
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	err := mgr.GetClient().Create(wctx, cm)
	g.Expect(err).To(MatchError(ContainSubstring("the manager stopped before the FeatureGate was read")))
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeFalse(), "held until the caller's deadline")
}

// Controllers that Setup builds start once Setup returns, as on a stock
// manager nothing starts before Start: a SetupWithManager that sets its
// reconciler's fields after Complete() (cluster-control-plane-machine-
// set-operator's shape) does not race with its controller. The object the
// controller watches exists before Setup runs, so a controller started at
// Complete() would reconcile while Setup still waits.
func TestGuardSetupStartsItsControllersWhenItReturns(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.Named(name)))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), cm) })

	var inSetup, duringSetup atomic.Bool
	reconciled := make(chan struct{}, 16)
	setup := func(mgr manager.Manager, _ featuregate.Snapshot) error {
		inSetup.Store(true)
		defer inSetup.Store(false)
		r := &fieldsAfterComplete{reconciled: reconciled, duringSetup: &duringSetup, inSetup: &inSetup}
		if err := ctrl.NewControllerManagedBy(mgr).Named(name).
			For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name }))).
			Complete(r); err != nil {
			return err
		}
		// A controller started by Complete would reconcile the ConfigMap
		// within this wait.
		NewWithT(t).Consistently(reconciled).WithTimeout(2 * time.Second).ShouldNot(Receive())
		r.client = mgr.GetClient() // set after Complete(), as such operators do
		return nil
	}
	gd := newGuard(t, featuregate.Options{Name: name, Setup: setup})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	g.Eventually(reconciled).WithTimeout(time.Minute).Should(Receive())
	g.Expect(duringSetup.Load()).To(BeFalse(), "reconciled while Setup ran")
}

// fieldsAfterComplete is a reconciler whose client is set after Complete().
type fieldsAfterComplete struct {
	client               client.Client
	reconciled           chan struct{}
	duringSetup, inSetup *atomic.Bool
}

func (r *fieldsAfterComplete) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	if r.inSetup.Load() || r.client == nil {
		r.duringSetup.Store(true)
	}
	r.reconciled <- struct{}{}
	return reconcile.Result{}, nil
}

// Calls an adopter makes before Start answer at once, as a stock manager's
// do, and never hold the Start that comes after them: a read is the cache's
// "not started" error, an informer (which the guarded manager cannot hand
// out before the FeatureGate is read) an error that says where to ask for
// it, and an index registered twice the conflict a stock cache returns at
// call time, not a cache that never builds.
func TestGuardedManagerAnswersAtOnceBeforeStart(t *testing.T) {
	g := NewWithT(t)
	gd := newGuard(t, featuregate.Options{Name: uniqueName()})
	mgr := gd.newManager(t, ctrl.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "any"}, &corev1.ConfigMap{})
	var notStarted *cache.ErrCacheNotStarted
	g.Expect(errors.As(err, &notStarted)).To(BeTrue(), "a read before Start: %v", err)

	_, err = mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
	g.Expect(err).To(MatchError(ContainSubstring("informer asked for before the manager started")))
	g.Expect(err).To(MatchError(ContainSubstring("Options.Setup")))
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "answered at once")

	byName := func(o client.Object) []string { return []string{o.GetName()} }
	g.Expect(mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "byName", byName)).To(Succeed())
	g.Expect(mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "byName", byName)).To(MatchError(ContainSubstring("indexer conflict")))
}

// With leader election and the API down at start, the lease is taken as
// soon as the API answers again: the elector's first try waits for the
// snapshot. A stock manager's first try fails at Start and the next comes
// one RetryPeriod later (OpenShift's 26 s here), so its controllers would
// start that long after the API returned.
func TestGuardTakesTheLeaseAsSoonAsTheAPIReturns(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.Named(name)))

	start := stopAPIServer(t, cp)
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{
		LeaderElection:          true,
		LeaderElectionID:        name,
		LeaderElectionNamespace: metav1.NamespaceDefault,
		// OpenShift's timings (library-go's LeaderElectionDefaulting).
		LeaseDuration: ptr.To(137 * time.Second),
		RenewDeadline: ptr.To(107 * time.Second),
		RetryPeriod:   ptr.To(26 * time.Second),
	})
	gd.start(t, mgr)
	g.Consistently(mgr.Elected()).WithTimeout(2 * time.Second).ShouldNot(BeClosed())

	start()
	returned := apiReady(t, cp.Config)
	g.Eventually(mgr.Elected()).WithTimeout(10*time.Second).WithPolling(10*time.Millisecond).Should(BeClosed(),
		"the lease not taken within 10 s of the API's return")
	t.Logf("lease taken %v after the API answered", time.Since(returned))
}

// A warmup runnable (a controller with EnableWarmup) keeps its kind:
// controller-runtime warms it up before this replica leads, and the guarded
// manager does too, once the snapshot is taken. Here another replica holds
// the lease for the test's length, so only the warmup may run.
func TestGuardWarmsUpBeforeItLeads(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.Named(name)))
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another replica"), LeaseDurationSeconds: ptr.To(int32(3600)), AcquireTime: &now, RenewTime: &now}}
	g.Expect(c.Create(ctx, lease)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), lease) })

	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{LeaderElection: true, LeaderElectionID: name, LeaderElectionNamespace: metav1.NamespaceDefault})
	w := &warmedUp{guard: gd.guard, warmed: make(chan struct{}), started: make(chan struct{})}
	g.Expect(mgr.Add(w)).To(Succeed())
	gd.start(t, mgr)
	g.Eventually(w.warmed).WithTimeout(time.Minute).Should(BeClosed(), "not warmed up")
	g.Expect(w.early.Load()).To(BeFalse(), "warmed up before the snapshot")
	g.Consistently(w.started).WithTimeout(2*time.Second).ShouldNot(BeClosed(), "started without the lease")
}

// warmedUp is a runnable that needs the lease and warms up without it.
type warmedUp struct {
	guard           *featuregate.Guard
	warmed, started chan struct{}
	early           atomic.Bool
}

func (w *warmedUp) Warmup(context.Context) error {
	if _, taken := w.guard.Snapshot(); !taken {
		w.early.Store(true)
	}
	close(w.warmed)
	return nil
}

func (w *warmedUp) Start(ctx context.Context) error {
	close(w.started)
	<-ctx.Done()
	return nil
}

func (w *warmedUp) NeedLeaderElection() bool { return true }

// A config whose credentials come from an exec plugin (which may set a
// client certificate and a dialer per transport) builds a guard and its
// manager, as it builds a stock manager.
func TestGuardTakesAnExecCredentialConfig(t *testing.T) {
	g := NewWithT(t)
	cfg := rest.CopyConfig(sharedControlPlane(t).Config)
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.ExecProvider = &clientcmdapi.ExecConfig{Command: "true", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	_, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred(), "a stock manager")
	gd := newGuardOn(t, cfg, featuregate.Options{Name: uniqueName()})
	gd.newManager(t, ctrl.Options{})
}
