package featuregate

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func managed(subresource, fields string, at time.Time) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
}

const (
	specFields   = `{"f:spec":{".":{},"f:featureSet":{}}}`
	statusFields = `{"f:status":{".":{},"f:featureGates":{}}}`
	labelFields  = `{"f:metadata":{"f:labels":{}}}`
)

// writtenAt reads the newest spec and status writes, and nothing else:
// a manager that owns only metadata wrote no spec.
func TestWrittenAt(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		managed("", specFields, t0),
		managed("status", statusFields, t0.Add(time.Second)),
		managed("", specFields, t0.Add(3*time.Second)),
		managed("", labelFields, t0.Add(9*time.Second)),
		managed("status", statusFields, t0.Add(2*time.Second)),
	}}}
	spec, status := writtenAt(fg)
	g.Expect(spec).To(Equal(t0.Add(3 * time.Second)))
	g.Expect(status).To(Equal(t0.Add(2 * time.Second)))

	spec, status = writtenAt(&configv1.FeatureGate{})
	g.Expect(spec.IsZero() && status.IsZero()).To(BeTrue(), "a FeatureGate from a file says nothing")
}

// A snapshot whose status is older than its spec is pending until a status
// written since is seen, or the wait after the spec write ends; one whose
// status is as new is not (the same second counts as caught up).
func TestEntryCheck(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	behind := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster", ManagedFields: []metav1.ManagedFieldsEntry{
		managed("status", statusFields, t0), managed("", specFields, t0.Add(time.Second))}}}
	rewritten := behind.DeepCopy()
	rewritten.ManagedFields = append(rewritten.ManagedFields, managed("status", statusFields, t0.Add(time.Second)))
	snap := Snapshot{version: "4.22.0", hasStatus: true, featureSet: configv1.TechPreviewNoUpgrade}

	t.Run("pending until a status written since is seen", func(t *testing.T) {
		g := NewWithT(t)
		e := &entryCheck{wait: time.Minute, log: logr.Discard()}
		e.taken(behind, snap, t0.Add(2*time.Second))
		g.Expect(e.pending(t0.Add(2 * time.Second))).To(BeTrue())
		e.seen(behind)
		g.Expect(e.pending(t0.Add(3*time.Second))).To(BeTrue(), "the same FeatureGate again")
		e.seen(rewritten)
		g.Expect(e.pending(t0.Add(3 * time.Second))).To(BeFalse())
	})
	t.Run("pending until the wait after the spec write ends", func(t *testing.T) {
		g := NewWithT(t)
		e := &entryCheck{wait: time.Minute, log: logr.Discard()}
		e.taken(behind, snap, t0.Add(2*time.Second))
		g.Expect(e.pending(t0.Add(60 * time.Second))).To(BeTrue())
		g.Expect(e.pending(t0.Add(61 * time.Second))).To(BeFalse())
	})
	t.Run("not pending", func(t *testing.T) {
		for name, tc := range map[string]struct {
			fg   *configv1.FeatureGate
			snap Snapshot
			now  time.Time
		}{
			"status written in the spec's second":       {fg: rewritten, snap: snap, now: t0.Add(2 * time.Second)},
			"no status entry read (no version)":         {fg: behind, snap: Snapshot{featureSet: configv1.TechPreviewNoUpgrade}, now: t0.Add(2 * time.Second)},
			"the spec written longer ago than the wait": {fg: behind, snap: snap, now: t0.Add(2 * time.Minute)},
		} {
			t.Run(name, func(t *testing.T) {
				e := &entryCheck{wait: time.Minute, log: logr.Discard()}
				e.taken(tc.fg, tc.snap, tc.now)
				NewWithT(t).Expect(e.pending(tc.now)).To(BeFalse())
			})
		}
	})
	t.Run("a guard that does not consume the feature set has none", func(t *testing.T) {
		var e *entryCheck
		e.taken(behind, snap, t0)
		e.seen(behind)
		NewWithT(t).Expect(e.pending(t0)).To(BeFalse())
	})
}
