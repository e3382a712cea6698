package featuregate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// OpenShift switches a feature set in two writes: the admin's
// spec.featureSet, then cluster-config-operator's rewrite of its version's
// status entry from it, a moment later. Each case runs a component under a
// kubelet-like loop (a process that exits 0 is started again) through that
// switch and counts its restarts against library-go's rule for the same
// writes: FeatureGateAccess restarts when its version's enabled or disabled
// list changes, so once whenever the entry is rewritten with other lists.
// A component never restarts more often than that, never for a change of
// nothing it consumes, and one that consumes the feature set acts on no
// mixed snapshot (the new feature set over the old set's gates).
func TestRestartsPerFeatureSetSwitch(t *testing.T) {
	const version = "4.22.0"
	// Gate H is enabled in every TechPreviewNoUpgrade entry of these cases:
	// a snapshot is mixed when its feature set and H disagree.
	defaultEntry := [2][]string{nil, {"G", "H"}}
	cases := []struct {
		name            string
		watched         []configv1.FeatureGateName
		watchFeatureSet bool
		techPreview     [2][]string // the rewritten entry: enabled, disabled
		want            int
	}{
		{name: "watched gate flips", watched: []configv1.FeatureGateName{"G"}, techPreview: [2][]string{{"G", "H"}, nil}, want: 1},
		{name: "watched gate unchanged", watched: []configv1.FeatureGateName{"G"}, techPreview: [2][]string{{"H"}, {"G"}}, want: 0},
		{name: "all gates, G flips", techPreview: [2][]string{{"G", "H"}, nil}, want: 1},
		{name: "all gates, only another flips", techPreview: [2][]string{{"H"}, {"G"}}, want: 1},
		{name: "feature set and all gates (the operator)", watchFeatureSet: true, techPreview: [2][]string{{"G", "H"}, nil}, want: 1},
	}
	for _, delay := range []time.Duration{500 * time.Millisecond, 3 * time.Second} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s, entry rewritten %s later", tc.name, delay), func(t *testing.T) {
				g := NewWithT(t)
				ctx := testContext(t)
				c := testClient(t)
				name := uniqueName()
				testenv.CreateFeatureGate(t, c, featureGate(configv1.Default, featuregatetest.Named(name),
					status(version, defaultEntry[0], defaultEntry[1]), status("4.21.0", []string{"G"}, nil)))
				libraryGo := 0
				if !slices.Equal(defaultEntry[0], tc.techPreview[0]) || !slices.Equal(defaultEntry[1], tc.techPreview[1]) {
					libraryGo = 1
				}

				opts := featuregate.Options{Name: name, Version: version, WatchedGates: tc.watched, WatchFeatureSet: tc.watchFeatureSet}
				k := &kubelet{t: t, opts: opts}
				k.start()
				g.Eventually(k.process().guard.Current).WithTimeout(time.Minute).Should(BeTrue())

				specUpdate(toTechPreview).apply(ctx, t, c, name)
				rewrite := time.NewTimer(delay) // cluster-config-operator's pace
				<-rewrite.C
				statusUpdate(func(fg *configv1.FeatureGate) {
					*statusEntry(fg, version) = details(version, tc.techPreview[0], tc.techPreview[1])
				}).apply(ctx, t, c, name)

				// Settled: the restarts expected came and no other follows, and
				// the running process vouches for its snapshot.
				restarted := func() int { k.restartIfStopped(); return len(k.processes) - 1 }
				g.Eventually(restarted).WithTimeout(time.Minute).Should(BeNumerically(">=", tc.want))
				g.Consistently(restarted).WithTimeout(3 * time.Second).Should(Equal(tc.want))
				g.Eventually(k.process().guard.Current).WithTimeout(time.Minute).Should(BeTrue())

				restarts := len(k.processes) - 1
				t.Logf("restarts %d (library-go %d); snapshots %v", restarts, libraryGo, k.snapshots())
				g.Expect(restarts).To(Equal(tc.want))
				g.Expect(restarts).To(BeNumerically("<=", libraryGo), "more restarts than library-go's rule")
				if tc.watchFeatureSet {
					for _, s := range k.snapshots() {
						g.Expect(s.FeatureSetName() == "TechPreviewNoUpgrade").To(Equal(s.Enabled("H")), "a mixed snapshot: %s", s)
					}
					last := k.snapshots()[len(k.processes)-1]
					g.Expect(last.FeatureSetName()).To(Equal("TechPreviewNoUpgrade"))
				}
			})
		}
	}
}

// kubelet starts a guarded manager, and another each time one exits 0, as
// a kubelet restarts a container; it is driven from the test goroutine.
type kubelet struct {
	t         *testing.T
	opts      featuregate.Options
	processes []*guarded
}

func (k *kubelet) start() {
	k.t.Helper()
	// Not newGuard, which watches the feature set for the detection
	// tests: here the case says what is consumed.
	gd := newGuardConsuming(k.t, sharedControlPlane(k.t).Config, k.opts)
	gd.start(k.t, gd.newManager(k.t, ctrl.Options{}))
	gd.taken(k.t)
	k.processes = append(k.processes, gd)
}

func (k *kubelet) process() *guarded { return k.processes[len(k.processes)-1] }

// restartIfStopped starts the next process once the current one has
// exited, with nil (exit 0); any other end fails the test.
func (k *kubelet) restartIfStopped() *guarded {
	k.t.Helper()
	select {
	case err := <-k.process().done:
		if err != nil {
			k.t.Fatalf("the manager ended with %v, not nil (a non-zero exit)", err)
		}
		k.start()
	default:
	}
	return k.process()
}

func (k *kubelet) snapshots() []featuregate.Snapshot {
	var out []featuregate.Snapshot
	for _, p := range k.processes {
		s, _ := p.guard.Snapshot()
		out = append(out, s)
	}
	return out
}

// A feature-set consumer never vouches for a mixed snapshot, however late
// cluster-config-operator rewrites the entry: here 15 s after the spec
// write, past the 10 s the first process holds its exit. Its replacement
// starts between the two writes and reads the new feature set over the old
// set's entry, as any process starting then would; the entry's status,
// last written before the spec (managedFields), keeps its Current false
// until the rewrite, which restarts it onto a snapshot that is not mixed.
// Every poll of the test looks: no process may answer Current true on a
// mixed snapshot. A late rewrite costs a second restart (library-go's
// accessor makes one), never a decision on gates the cluster has not
// written for its feature set.
func TestNoMixedSnapshotAtALateRewrite(t *testing.T) {
	const version = "4.22.0"
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	// Gate H is enabled in the TechPreviewNoUpgrade entry only.
	testenv.CreateFeatureGate(t, c, featureGate(configv1.Default, featuregatetest.Named(name), status(version, nil, []string{"G", "H"})))
	k := &kubelet{t: t, opts: featuregate.Options{Name: name, Version: version, WatchFeatureSet: true}}
	k.start()
	g.Eventually(k.process().guard.Current).WithTimeout(time.Minute).Should(BeTrue())

	var vouched []string
	look := func() int {
		p := k.restartIfStopped()
		if s, ok := p.guard.Snapshot(); ok && s.FeatureSetName() == "TechPreviewNoUpgrade" && !s.Enabled("H") && p.guard.Current() {
			vouched = append(vouched, fmt.Sprintf("process %d: %s", len(k.processes), s))
		}
		return len(k.processes) - 1
	}
	// managedFields keep seconds: a spec written in the second of the
	// status's last write would count as caught up with (entry.go). The
	// admin's switch comes later than that, as in a cluster.
	g.Eventually(func() bool { return time.Now().After(statusWrittenAt(ctx, t, c, name).Add(time.Second)) }).
		WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
	specUpdate(toTechPreview).apply(ctx, t, c, name)
	// The first process holds its exit 10 s, then stops: its replacement
	// reads the mixed pair and must not vouch for it.
	g.Eventually(look).WithTimeout(30 * time.Second).WithPolling(10 * time.Millisecond).Should(Equal(1))
	replacement := k.process()
	g.Eventually(func() bool { _, ok := replacement.guard.Snapshot(); return ok }).WithTimeout(time.Minute).Should(BeTrue())
	g.Consistently(look).WithTimeout(3 * time.Second).WithPolling(10 * time.Millisecond).Should(Equal(1))
	_, said := replacement.log.Find(testenv.All(testenv.Message("FeatureGate status older than its spec; not vouching for the snapshot until it is written again"),
		testenv.KeyEquals("featureSet", "TechPreviewNoUpgrade"), testenv.HasKey("specWritten"), testenv.HasKey("statusWritten")))
	g.Expect(said).To(BeTrue(), "the replacement says why it does not vouch:\n%s", replacement.log)

	late := time.NewTimer(15 * time.Second) // cluster-config-operator restarting
	for stop := false; !stop; {
		select {
		case <-late.C:
			stop = true
		case <-time.After(10 * time.Millisecond):
			look()
		}
	}
	statusUpdate(func(fg *configv1.FeatureGate) {
		*statusEntry(fg, version) = details(version, []string{"G", "H"}, nil)
	}).apply(ctx, t, c, name)
	g.Eventually(look).WithTimeout(time.Minute).WithPolling(10 * time.Millisecond).Should(Equal(2))
	g.Eventually(func() bool { look(); return k.process().guard.Current() }).WithTimeout(time.Minute).WithPolling(10 * time.Millisecond).Should(BeTrue())
	g.Consistently(look).WithTimeout(2 * time.Second).WithPolling(10 * time.Millisecond).Should(Equal(2))

	t.Logf("snapshots %v", k.snapshots())
	g.Expect(vouched).To(BeEmpty(), "Current true on a mixed snapshot")
	last := k.snapshots()[2]
	g.Expect(last.FeatureSetName()).To(Equal("TechPreviewNoUpgrade"))
	g.Expect(last.Enabled("H")).To(BeTrue())
}

// statusWrittenAt is when FeatureGate name's status was last written, as
// its managedFields say.
func statusWrittenAt(ctx context.Context, t *testing.T, c client.Client, name string) time.Time {
	t.Helper()
	fg := &configv1.FeatureGate{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, fg); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for _, m := range fg.ManagedFields {
		if m.Subresource == "status" && m.Time != nil && m.Time.After(at) {
			at = m.Time.Time
		}
	}
	return at
}
