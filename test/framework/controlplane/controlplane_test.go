package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The control plane is real: the CRDs come from openshift/api with their CEL
// rules, and the API server enforces them.
func TestControlPlaneEnforcesFeatureGateCEL(t *testing.T) {
	g := NewWithT(t)
	cp, err := Start(Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(cp.Stop()).To(Succeed()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := newClient(t, cp.Config)
	fg := FeatureGate(configv1.TechPreviewNoUpgrade)
	g.Expect(c.Create(ctx, fg)).To(Succeed())

	fg.Spec.FeatureSet = configv1.DevPreviewNoUpgrade
	err = c.Update(ctx, fg)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("TechPreviewNoUpgrade may not be changed"))
}

// Fault tests stop and restart the API server under a running client, and
// change the cluster through a second API server on the same etcd.
func TestControlPlaneRestartAndSecondAPIServer(t *testing.T) {
	g := NewWithT(t)
	cp, err := Start(Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(cp.Stop()).To(Succeed()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, cp.Config)
	g.Expect(c.Create(ctx, FeatureGate(""))).To(Succeed())

	g.Expect(cp.StopAPIServer()).To(Succeed())
	err = c.Get(ctx, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(strings.Contains(err.Error(), "connection refused")).To(BeTrue(), err.Error())

	second, err := cp.SecondAPIServer()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Host).NotTo(Equal(cp.Host()))
	c2 := newClient(t, second)
	fg := &configv1.FeatureGate{}
	g.Expect(c2.Get(ctx, client.ObjectKey{Name: "cluster"}, fg)).To(Succeed())
	fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
	g.Expect(c2.Update(ctx, fg)).To(Succeed())

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(func() (configv1.FeatureSet, error) {
		err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, fg)
		return fg.Spec.FeatureSet, err
	}).WithTimeout(30 * time.Second).Should(Equal(configv1.TechPreviewNoUpgrade))
}

// The CRD files are found in the pinned module without an API server, so an
// openshift/api bump that renames them fails here first.
func TestOpenShiftCRDsExist(t *testing.T) {
	files, err := OpenShiftCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("OpenShiftCRDs() = %v, want the FeatureGate, ClusterOperator, ClusterVersion and APIServer CRDs", files)
	}
}

// The fixture sends lists, never null, for the gates a status entry lacks.
func TestFeatureGateFixture(t *testing.T) {
	g := NewWithT(t)
	fg := FeatureGate(configv1.CustomNoUpgrade, Named("other"), CustomGates([]string{"A"}, nil), StatusGates("4.1.0", nil, []string{"B"}))
	g.Expect(fg.Name).To(Equal("other"))
	g.Expect(fg.Spec.CustomNoUpgrade.Enabled).To(Equal([]configv1.FeatureGateName{"A"}))
	g.Expect(fg.Spec.CustomNoUpgrade.Disabled).To(BeEmpty())
	g.Expect(fg.Status.FeatureGates).To(Equal([]configv1.FeatureGateDetails{{Version: "4.1.0", Enabled: []configv1.FeatureGateAttributes{}, Disabled: GateAttributes("B")}}))
}

// An etcd member partitioned from the others keeps running and answering
// its API server, which then can neither read consistently nor see a
// write made through another member, until the partition heals. etcd
// restarts as a cluster too.
func TestPartitionedEtcdMember(t *testing.T) {
	g := NewWithT(t)
	cp, err := Start(Options{EtcdMembers: 3})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(cp.Stop()).To(Succeed()) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	third, err := cp.EtcdMemberURL(2)
	g.Expect(err).NotTo(HaveOccurred())
	twin, err := cp.SecondAPIServerOn(third)
	g.Expect(err).NotTo(HaveOccurred())
	c := newClient(t, cp.Config)
	short := rest.CopyConfig(twin.Config)
	short.Timeout = 3 * time.Second
	c2 := newClient(t, short)

	fg := FeatureGate(configv1.Default)
	g.Expect(c.Create(ctx, fg)).To(Succeed())
	got := &configv1.FeatureGate{}
	g.Eventually(func() error { return c2.Get(ctx, client.ObjectKey{Name: "cluster"}, got) }).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(cp.PartitionEtcdMember(2)).To(Succeed())
	// The majority elects a leader of its own if the member led.
	g.Eventually(func() error {
		fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
		return c.Update(ctx, fg)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	err = c2.Get(ctx, client.ObjectKey{Name: "cluster"}, got)
	g.Expect(err).To(HaveOccurred(), "a consistent read through the partitioned member: %v", got.Spec.FeatureSet)

	g.Expect(cp.HealEtcdMember(2)).To(Succeed())
	g.Eventually(func() (configv1.FeatureSet, error) {
		err := c2.Get(ctx, client.ObjectKey{Name: "cluster"}, got)
		return got.Spec.FeatureSet, err
	}).WithTimeout(30 * time.Second).Should(Equal(configv1.TechPreviewNoUpgrade))

	g.Expect(cp.StopEtcd()).To(Succeed())
	g.Expect(cp.StartEtcd()).To(Succeed())
	g.Eventually(func() error { return c.Get(ctx, client.ObjectKey{Name: "cluster"}, got) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func() error { return c2.Get(ctx, client.ObjectKey{Name: "cluster"}, got) }).WithTimeout(30 * time.Second).Should(Succeed())
}
