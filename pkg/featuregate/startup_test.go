package featuregate_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// The control plane shared by the tests here that need an API server with
// the OpenShift CRDs. It starts on first use, so that the pure tests do not
// pay for it, and TestMain stops it.
var shared testenv.Shared

func TestMain(m *testing.M) {
	// Shown only when a test fails (or with -v).
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	code := m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
		code = 1
	}
	os.Exit(code)
}

func sharedControlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	return shared.Get(t)
}

var names atomic.Int32

// uniqueName keeps tests on one control plane out of each other's way.
func uniqueName() string { return fmt.Sprintf("cluster-%d", names.Add(1)) }

// liveGetter reads as the guard does: the API source's REST client, live,
// without retries of its own.
func liveGetter(t *testing.T, cfg *rest.Config) featuregate.Getter {
	t.Helper()
	lg, err := featuregate.NewLiveGetter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runStartup starts s as the manager would, and stops it when the test
// ends. The returned channel receives Start's result.
func runStartup(t *testing.T, s *featuregate.Startup) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		done <- s.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("Startup.Start did not return after its context was cancelled")
		}
	})
	return done
}

// checkMessage is what /readyz/featuregate would say.
func checkMessage(s *featuregate.Startup) func() string {
	return func() string {
		if err := s.Check(nil); err != nil {
			return err.Error()
		}
		return ""
	}
}

// snapshotSeen is a runnable behind AfterSnapshot that records whether the
// snapshot existed when it was started.
type snapshotSeen struct {
	startup *featuregate.Startup
	started atomic.Bool
	hadSnap atomic.Bool
}

func (r *snapshotSeen) Start(ctx context.Context) error {
	_, ok := r.startup.Snapshot()
	r.hadSnap.Store(ok)
	r.started.Store(true)
	<-ctx.Done()
	return nil
}

// The bug report's story: the process starts while the API server refuses
// connections. It must not guess a feature set, must say why it is not
// ready, and must take the real snapshot once the API returns.
func TestStartupWaitsForAPIServer(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testenv.Client(t, cp.Config)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, featureGate(configv1.TechPreviewNoUpgrade, featuregatetest.Named(name)))

	g.Expect(cp.StopAPIServer()).To(Succeed())
	down := true
	t.Cleanup(func() { // leave the shared control plane up for the next test
		if down {
			if err := cp.StartAPIServer(); err != nil {
				t.Errorf("restart API server: %v", err)
			}
		}
	})

	var snapshots, announcedReady atomic.Int32
	var s *featuregate.Startup
	s = featuregate.NewStartupAnnouncing(liveGetter(t, cp.Config), featuregate.Options{
		Name: name, BackoffCap: 250 * time.Millisecond,
	}, func(featuregate.Snapshot) {
		snapshots.Add(1)
		if s.Check(nil) == nil { // readiness first, then the Event
			announcedReady.Add(1)
		}
	})
	after := &snapshotSeen{startup: s}
	afterCtx, stopAfter := context.WithCancel(context.Background())
	afterDone := runAsync(afterCtx, s.AfterSnapshot(after).Start)
	t.Cleanup(func() { stopAfter(); <-afterDone })
	done := runStartup(t, s)

	g.Eventually(checkMessage(s)).WithTimeout(30 * time.Second).Should(And(
		HavePrefix("initial FeatureGate not read yet: "),
		ContainSubstring("connection refused"),
	))
	_, ok := s.Snapshot()
	g.Expect(ok).To(BeFalse(), "no snapshot may be guessed while the API is down")
	g.Expect(s.Taken()).NotTo(BeClosed())
	g.Expect(after.started.Load()).To(BeFalse())
	g.Expect(snapshots.Load()).To(BeZero())

	g.Expect(cp.StartAPIServer()).To(Succeed())
	down = false
	g.Eventually(s.Taken()).WithTimeout(time.Minute).Should(BeClosed())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	snap, ok := s.Snapshot()
	g.Expect(ok).To(BeTrue())
	g.Expect(snap.FeatureSetName()).To(Equal("TechPreviewNoUpgrade"))
	g.Expect(s.Check(nil)).To(Succeed())
	g.Expect(snapshots.Load()).To(Equal(int32(1)))
	g.Expect(announcedReady.Load()).To(Equal(int32(1)), "announced before the snapshot was published")
	g.Eventually(after.started.Load).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(after.hadSnap.Load()).To(BeTrue(), "AfterSnapshot started its runnable before the snapshot was published")
}

// An absent FeatureGate is not Default: no snapshot until it exists.
func TestStartupWaitsForFeatureGate(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testenv.Client(t, cp.Config)
	name := uniqueName()

	s := featuregate.NewStartup(liveGetter(t, cp.Config), featuregate.Options{Name: name, BackoffCap: 250 * time.Millisecond})
	done := runStartup(t, s)
	g.Eventually(checkMessage(s)).WithTimeout(30 * time.Second).Should(
		Equal(fmt.Sprintf("initial FeatureGate not read yet: FeatureGate %s not found", name)))
	g.Expect(s.Taken()).NotTo(BeClosed())

	testenv.CreateFeatureGate(t, c, featureGate("", featuregatetest.Named(name)))
	g.Eventually(s.Taken()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	snap, _ := s.Snapshot()
	g.Expect(snap.FeatureSetName()).To(Equal("Default"))
	g.Expect(s.Check(nil)).To(Succeed())
}

// Without the CRD the message points at the API, not at the object: the
// fix is different. Installing the CRD and creating the object ends the
// wait like any other outage.
func TestStartupWaitsForCRD(t *testing.T) {
	g := NewWithT(t)
	cp, err := testenv.Start([]string{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	ctx := testContext(t)
	c := testenv.Client(t, cp.Config)

	// The guard's own read.
	s := featuregate.NewStartup(liveGetter(t, cp.Config), featuregate.Options{BackoffCap: 250 * time.Millisecond})
	done := runStartup(t, s)
	// A reader on a discovery REST mapper fails earlier, with "no matches
	// for kind"; it must say the same.
	viaDiscovery := featuregate.NewStartup(c, featuregate.Options{BackoffCap: 250 * time.Millisecond})
	viaDiscoveryDone := runStartup(t, viaDiscovery)
	for _, s := range []*featuregate.Startup{s, viaDiscovery} {
		g.Eventually(checkMessage(s)).WithTimeout(30 * time.Second).Should(And(
			HavePrefix("initial FeatureGate not read yet: "),
			ContainSubstring("FeatureGate API not served (is the config.openshift.io CRD installed?)"),
		))
		g.Expect(s.Taken()).NotTo(BeClosed())
	}

	crds, err := testenv.OpenShiftCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true})
	g.Expect(err).NotTo(HaveOccurred())
	fg := featureGate(configv1.TechPreviewNoUpgrade)
	g.Eventually(func() error { return c.Create(ctx, fg) }).WithTimeout(30 * time.Second).Should(Succeed())

	for _, s := range []*featuregate.Startup{s, viaDiscovery} {
		g.Eventually(s.Taken()).WithTimeout(30 * time.Second).Should(BeClosed())
		snap, _ := s.Snapshot()
		g.Expect(snap.FeatureSetName()).To(Equal("TechPreviewNoUpgrade"))
	}
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Eventually(viaDiscoveryDone).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

// With a version configured, a FeatureGate whose status has no entry for it
// yet is not a snapshot: which gates are on is still unknown.
func TestStartupWaitsForVersionEntry(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	c := testenv.Client(t, cp.Config)
	name := uniqueName()
	fg := featureGate(configv1.TechPreviewNoUpgrade, featuregatetest.Named(name))
	testenv.CreateFeatureGate(t, c, fg)
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{details("4.10.0", []string{"GateA"}, nil)}
	g.Expect(c.Status().Update(ctx, fg)).To(Succeed())

	s := featuregate.NewStartup(liveGetter(t, cp.Config), featuregate.Options{Name: name, Version: "4.11.0", BackoffCap: 250 * time.Millisecond})
	done := runStartup(t, s)
	g.Eventually(checkMessage(s)).WithTimeout(30 * time.Second).Should(And(
		HavePrefix("initial FeatureGate not read yet: "),
		ContainSubstring("no status.featureGates entry"),
		ContainSubstring("4.11.0"),
	))
	g.Expect(s.Taken()).NotTo(BeClosed())

	fg.Status.FeatureGates = append(fg.Status.FeatureGates, details("4.11.0", []string{"GateA", "GateC"}, []string{"GateB"}))
	g.Expect(c.Status().Update(ctx, fg)).To(Succeed())
	g.Eventually(s.Taken()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	snap, _ := s.Snapshot()
	g.Expect(snap.Version()).To(Equal("4.11.0"))
	g.Expect(snap.KnownFeatures()).To(Equal([]configv1.FeatureGateName{"GateA", "GateB", "GateC"}))
	g.Expect(snap.Enabled("GateA")).To(BeTrue())
	g.Expect(snap.Enabled("GateC")).To(BeTrue())
	g.Expect(snap.Enabled("GateB")).To(BeFalse())
	g.Expect(snap.String()).To(Equal("TechPreviewNoUpgrade (version 4.11.0: enabled [GateA GateC], disabled [GateB])"))
}

// --initial-fetch-timeout: for those who prefer a crash loop.
func TestStartupTimeout(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	name := uniqueName()
	s := featuregate.NewStartup(liveGetter(t, cp.Config), featuregate.Options{Name: name, BackoffCap: 250 * time.Millisecond, InitialFetchTimeout: time.Second})
	err := s.Start(ctx)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("no FeatureGate snapshot after 1s (initial fetch timeout)"),
		ContainSubstring(fmt.Sprintf("FeatureGate %s not found", name)),
	)))
	g.Expect(s.Taken()).NotTo(BeClosed())
	g.Expect(s.Check(nil)).To(HaveOccurred())
}

// The manager stopping (a signal) while the read is retried is no error.
func TestStartupReturnsWhenCancelled(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	s := featuregate.NewStartup(liveGetter(t, cp.Config), featuregate.Options{Name: uniqueName()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, s.Start)
	g.Eventually(checkMessage(s)).WithTimeout(30 * time.Second).Should(ContainSubstring("not found"))
	cancel()
	// The backoff cap is 2s; returning takes at most about that.
	g.Eventually(done).WithTimeout(15 * time.Second).Should(Receive(BeNil()))
	g.Expect(s.Taken()).NotTo(BeClosed())
}
