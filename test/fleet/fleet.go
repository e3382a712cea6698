package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

const fgName = "cluster"

// Config is a run's shape.
type Config struct {
	N    int
	Seed uint64
	// Settle is how long no adopter may start or exit, all Ready, before a
	// change counts as settled.
	Settle time.Duration
	// Consumer is the examples/consumer binary.
	Consumer string
}

// Fleet is the control plane, the FeatureGate as the harness last wrote
// it, and the adopters.
type Fleet struct {
	t          *testing.T
	cfg        Config
	rng        *rand.Rand
	cp         *controlplane.ControlPlane
	admin      client.Client
	kubeconfig string
	Gates      Gates
	Adopters   []*Adopter

	// The FeatureGate as written: the harness is its only writer.
	featureSet     configv1.FeatureSet
	customEnabled  sets.Set[string]
	customDisabled sets.Set[string]
	entries        map[string]Entry
	lastWrite      time.Time

	// The model of the phase under way: library-go's restarts and the
	// gates changed under each adopter's version.
	modelMu   sync.Mutex
	libraryGo map[string]int
	changedBy map[string]sets.Set[string]
}

// New starts a control plane with the real OpenShift CRDs, creates the
// FeatureGate (Default, an entry per version) and plans the adopters; Start
// starts them. Everything stops when t ends.
func New(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	f := &Fleet{t: t, cfg: cfg, rng: rng}
	f.Gates = newGates(rng)
	f.cp = harness.StartControlPlane(t, controlplane.Options{})
	f.admin = harness.Client(t, f.cp.Config)
	f.kubeconfig = harness.Kubeconfig(t, f.cp.Config)
	specs := plan(rng, cfg.N, f.Gates)
	for _, s := range specs {
		// Each serves /decide (Current per request), which the stampede
		// asks: a guard proves only while asked, so an unasked fleet
		// could not lapse.
		args := f.consumerArgs(s)
		a := newAdopter(s, cfg.Consumer, func(version string, addrs []string) []string {
			return append(args(version, addrs), "--decide-bind-address="+addrs[1])
		})
		a.ports = 1
		f.Adopters = append(f.Adopters, a)
	}
	f.featureSet = configv1.Default
	f.entries = map[string]Entry{}
	for _, v := range f.versions() {
		f.entries[v] = Entry{Enabled: f.Gates.Default.Clone()}
	}
	f.create(t.Context())
	// Stopped before the control plane (cleanups run last first).
	t.Cleanup(f.StopAll)
	return f
}

// consumerArgs is examples/consumer's command line for spec.
func (f *Fleet) consumerArgs(s Spec, extra ...string) func(version string, addrs []string) []string {
	return func(version string, addrs []string) []string {
		return append([]string{
			"--kubeconfig=" + f.kubeconfig,
			"--health-probe-bind-address=" + addrs[0],
			"--release-version=" + version,
			"--gate=" + f.Gates.Common,
			"--watched-gates=" + strings.Join(s.Watched, ","),
			fmt.Sprintf("--watch-feature-set=%t", s.WatchFeatureSet),
			"--zap-time-encoding=rfc3339nano",
		}, extra...)
	}
}

// versions are the adopters' versions (and so the entries), sorted.
func (f *Fleet) versions() []string {
	vs := sets.New[string]()
	for _, a := range f.Adopters {
		vs.Insert(a.Version())
	}
	return sets.List(vs)
}

// Start starts every adopter's loop.
func (f *Fleet) Start() {
	for _, a := range f.Adopters {
		a.Run()
	}
}

// StopAll stops every adopter, in parallel.
func (f *Fleet) StopAll() {
	var wg sync.WaitGroup
	for _, a := range f.Adopters {
		wg.Go(a.Stop)
	}
	wg.Wait()
}

// featureGate is the object as the harness means it to be.
func (f *Fleet) featureGate() *configv1.FeatureGate {
	fg := controlplane.FeatureGate(f.featureSet)
	if f.featureSet == configv1.CustomNoUpgrade {
		fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{
			Enabled:  gateNames(f.customEnabled),
			Disabled: gateNames(f.customDisabled),
		}
	}
	fg.Status.FeatureGates = f.statusEntries()
	return fg
}

func (f *Fleet) statusEntries() []configv1.FeatureGateDetails {
	var out []configv1.FeatureGateDetails
	for _, v := range slices.Sorted(maps.Keys(f.entries)) {
		out = append(out, f.entries[v].details(v, f.Gates))
	}
	return out
}

func gateNames(s sets.Set[string]) []configv1.FeatureGateName {
	out := []configv1.FeatureGateName{}
	for _, n := range sets.List(s) {
		out = append(out, configv1.FeatureGateName(n))
	}
	return out
}

func (f *Fleet) create(ctx context.Context) {
	f.t.Helper()
	if err := controlplane.CreateFeatureGate(ctx, f.admin, f.featureGate()); err != nil {
		f.t.Fatalf("%v", err)
	}
	f.lastWrite = time.Now()
}

// writeSpec writes spec as the admin does; the entries are not touched.
func (f *Fleet) writeSpec(ctx context.Context, set configv1.FeatureSet, enabled, disabled sets.Set[string]) error {
	f.featureSet, f.customEnabled, f.customDisabled = set, enabled, disabled
	want := f.featureGate().Spec
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fg := &configv1.FeatureGate{}
		if err := f.admin.Get(ctx, client.ObjectKey{Name: fgName}, fg); err != nil {
			return err
		}
		fg.Spec = want
		return f.admin.Update(ctx, fg)
	})
	f.lastWrite = time.Now()
	if err != nil {
		return fmt.Errorf("write FeatureGate spec (feature set %s): %w", set, err)
	}
	return nil
}

// writeEntries changes the entries with change and writes the status as
// cluster-config-operator does, then applies library-go's rule to it.
func (f *Fleet) writeEntries(ctx context.Context, change func(map[string]Entry)) error {
	before := maps.Clone(f.entries)
	change(f.entries)
	want := f.statusEntries()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fg := &configv1.FeatureGate{}
		if err := f.admin.Get(ctx, client.ObjectKey{Name: fgName}, fg); err != nil {
			return err
		}
		fg.Status.FeatureGates = want
		return f.admin.Status().Update(ctx, fg)
	})
	f.lastWrite = time.Now()
	if err != nil {
		return fmt.Errorf("write FeatureGate status entries: %w", err)
	}
	f.model(before, f.entries)
	return nil
}

// model applies library-go's rule to one status write: FeatureGateAccess
// restarts when its version's entry's enabled or disabled set changes,
// once per such write, whatever spec.featureSet says. An entry that is
// missing before or after restarts nothing (library-go keeps its gates and
// reports an error).
func (f *Fleet) model(before, after map[string]Entry) {
	f.modelMu.Lock()
	defer f.modelMu.Unlock()
	for _, a := range f.Adopters {
		v := a.Version()
		old, ok1 := before[v]
		cur, ok2 := after[v]
		if !ok1 || !ok2 {
			continue
		}
		if d := changed(old, cur); d.Len() > 0 {
			f.libraryGo[a.Spec.Name]++
			f.changedBy[a.Spec.Name] = f.changedBy[a.Spec.Name].Union(d)
		}
	}
}

// resetModel starts a phase's counts.
func (f *Fleet) resetModel() {
	f.modelMu.Lock()
	defer f.modelMu.Unlock()
	f.libraryGo, f.changedBy = map[string]int{}, map[string]sets.Set[string]{}
	for _, a := range f.Adopters {
		f.changedBy[a.Spec.Name] = sets.New[string]()
	}
}

// recreate stops the fleet, deletes the FeatureGate and creates it again
// as build says, and starts the fleet on it: the only way to a feature set
// the CRD forbids leaving TechPreviewNoUpgrade for. The harness's restarts,
// not the guard's.
func (f *Fleet) recreate(ctx context.Context, set configv1.FeatureSet, enabled, disabled sets.Set[string], entries map[string]Entry) error {
	f.StopAll()
	fg := &configv1.FeatureGate{}
	fg.Name = fgName
	if err := f.admin.Delete(ctx, fg); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete FeatureGate: %w", err)
	}
	if err := poll(ctx, 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		err := f.admin.Get(ctx, client.ObjectKey{Name: fgName}, &configv1.FeatureGate{})
		return apierrors.IsNotFound(err), fmt.Sprintf("FeatureGate still there (%v)", err)
	}); err != nil {
		return err
	}
	f.featureSet, f.customEnabled, f.customDisabled, f.entries = set, enabled, disabled, entries
	if err := controlplane.CreateFeatureGate(ctx, f.admin, f.featureGate()); err != nil {
		return err
	}
	f.lastWrite = time.Now()
	f.Start()
	return nil
}

// poll calls cond every interval until it is true or timeout passes; the
// error carries cond's last word.
func poll(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %s", timeout, why)
		case <-t.C:
		}
	}
}

// settleTimeout bounds a settle: starting the whole fleet on two cores is
// the slowest case.
func (f *Fleet) settleTimeout() time.Duration {
	return time.Minute + time.Duration(f.cfg.N)*2*time.Second
}

// Settle waits until every adopter is Ready and none has started or exited,
// nor has the harness written the FeatureGate, for the settle window. A
// non-zero exit fails it at once.
func (f *Fleet) Settle(ctx context.Context) error {
	var failed error
	err := poll(ctx, f.settleTimeout(), 250*time.Millisecond, func() (bool, string) {
		if failed = f.failures(); failed != nil {
			return true, ""
		}
		quiet := f.lastWrite
		var notReady []string
		for _, a := range f.Adopters {
			quiet = later(quiet, a.LastEvent())
			if !a.Ready() {
				notReady = append(notReady, a.Spec.Name)
			}
		}
		if len(notReady) > 0 {
			return false, fmt.Sprintf("not Ready: %v", notReady)
		}
		if since := time.Since(quiet); since < f.cfg.Settle {
			return false, fmt.Sprintf("last start, exit or write %s ago, under the settle window %s", since.Round(time.Millisecond), f.cfg.Settle)
		}
		return true, ""
	})
	if failed != nil {
		return fmt.Errorf("an adopter failed: %w", failed)
	}
	if err != nil {
		return fmt.Errorf("fleet not settled: %w", err)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// failures joins every adopter's failures.
func (f *Fleet) failures() error {
	var errs []error
	for _, a := range f.Adopters {
		for _, s := range a.Failures() {
			errs = append(errs, errors.New(s))
		}
	}
	return errors.Join(errs...)
}
