package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// Every kind of write asks the guard at the moment it would be sent; reads
// pass through.
func TestGuardWritesRefusesEveryWriteWhileNotCurrent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "default", "x"
	gates := featuregatetest.New(configv1.Default)
	c := guardWrites(fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm.DeepCopy()).WithStatusSubresource(&corev1.ConfigMap{}).Build(), gates)

	gates.SetStale(true)
	writes := map[string]func() error{
		"create":        func() error { o := cm.DeepCopy(); o.Name = "y"; return c.Create(ctx, o) },
		"update":        func() error { return c.Update(ctx, cm.DeepCopy()) },
		"patch":         func() error { return c.Patch(ctx, cm.DeepCopy(), client.MergeFrom(cm.DeepCopy())) },
		"delete":        func() error { return c.Delete(ctx, cm.DeepCopy()) },
		"deleteAllOf":   func() error { return c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("default")) },
		"status update": func() error { return c.Status().Update(ctx, cm.DeepCopy()) },
		"status patch":  func() error { return c.Status().Patch(ctx, cm.DeepCopy(), client.MergeFrom(cm.DeepCopy())) },
	}
	for name, write := range writes {
		g.Expect(write()).To(MatchError(errNotCurrent), name)
	}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed(), "reads pass through")
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "y"}, &corev1.ConfigMap{})).NotTo(Succeed(), "nothing was created")

	gates.SetStale(false)
	g.Expect(writes["create"]()).To(Succeed())
	g.Expect(writes["delete"]()).To(Succeed())
}

// writeCounter counts the writes that reach the API server, and runs
// after on each.
type writeCounter struct {
	client.Client
	writes atomic.Int32
	after  func(n int32)
}

func (c *writeCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	err := c.Client.Apply(ctx, obj, opts...)
	c.after(c.writes.Add(1))
	return err
}

// A run whose proof lapses between two writes of one run level sends
// nothing more: the run is postponed, not failed, remembers nothing of what
// it applied, and the next one, once the guard vouches again, applies all.
func TestApplyPostponedWhenProofLapsesMidLevel(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := controlplane.NewClient(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dir := t.TempDir()
	const objects = 4
	for i := range objects {
		doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: level-%d\n  namespace: default\n", i)
		g.Expect(os.WriteFile(filepath.Join(dir, fmt.Sprintf("0000_10_level-%d.yaml", i)), []byte(doc), 0o600)).To(Succeed())
	}
	gates := featuregatetest.New(configv1.Default)
	counting := &writeCounter{Client: c, after: func(n int32) {
		if n == 1 {
			gates.SetStale(true) // the proof lapses after the first write
		}
	}}
	a := &Applier{Client: counting, Reader: c, Gates: gates, Dir: dir, ResyncPeriod: time.Minute, Parallelism: 1}
	snap, _ := gates.Snapshot()

	run := a.Apply(ctx, snap)
	g.Expect(run.Postponed).To(BeTrue())
	g.Expect(run.Aborted).To(BeFalse())
	g.Expect(run.Failed).To(BeEmpty(), "a write held back is not a failure")
	g.Expect(counting.writes.Load()).To(Equal(int32(1)), "no write after the proof lapsed")
	g.Expect(a.applied).To(BeEmpty(), "a postponed run is not remembered")

	gates.SetStale(false)
	run = a.Apply(ctx, snap)
	g.Expect(run.Postponed).To(BeFalse())
	g.Expect(run.Failed).To(BeEmpty())
	for i := range objects {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("level-%d", i)}, &corev1.ConfigMap{})).To(Succeed())
	}
}
