package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// AdopterResult is one adopter's count for one change.
type AdopterResult struct {
	Spec      Spec   `json:"spec"`
	Version   string `json:"version"`
	Guard     int    `json:"guard"`
	LibraryGo int    `json:"libraryGo"`
	// ConsumedChanged lists the gates it consumes that the change flipped
	// under its version.
	ConsumedChanged []string `json:"consumedChanged,omitempty"`
}

// Phase is one change's outcome across the fleet.
type Phase struct {
	Name      string          `json:"name"`
	Writes    []string        `json:"writes"`
	Adopters  []AdopterResult `json:"adopters"`
	Guard     int             `json:"guard"`
	LibraryGo int             `json:"libraryGo"`
	// Settled is the time from the first write until the fleet settled,
	// the settle window included.
	Settled time.Duration `json:"settled"`
}

// run makes one change (write) and counts what it caused once the fleet
// has settled.
func (f *Fleet) run(ctx context.Context, name string, write func(ctx context.Context, log func(string)) error) (Phase, error) {
	before := map[string]int{}
	for _, a := range f.Adopters {
		before[a.Spec.Name] = a.Restarts()
	}
	f.resetModel()
	ph := Phase{Name: name}
	start := time.Now()
	log := func(w string) {
		ph.Writes = append(ph.Writes, fmt.Sprintf("+%s %s", time.Since(start).Round(time.Millisecond), w))
	}
	if err := write(ctx, log); err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	if err := f.Settle(ctx); err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	ph.Settled = time.Since(start)
	f.modelMu.Lock()
	defer f.modelMu.Unlock()
	for _, a := range f.Adopters {
		r := AdopterResult{Spec: a.Spec, Version: a.Version(), Guard: a.Restarts() - before[a.Spec.Name], LibraryGo: f.libraryGo[a.Spec.Name]}
		for _, g := range sets.List(f.changedBy[a.Spec.Name]) {
			if a.Spec.Consumes(g) {
				r.ConsumedChanged = append(r.ConsumedChanged, g)
			}
		}
		ph.Adopters = append(ph.Adopters, r)
		ph.Guard += r.Guard
		ph.LibraryGo += r.LibraryGo
	}
	return ph, nil
}

// switchEntries writes spec, then rewrites each version's entry to enabled
// 0.5-3 s later (seeded), one status write per version, as
// cluster-config-operator catches up.
func (f *Fleet) switchEntries(ctx context.Context, log func(string), set configv1.FeatureSet, ce, cd, enabled sets.Set[string]) error {
	if err := f.writeSpec(ctx, set, ce, cd); err != nil {
		return err
	}
	log(fmt.Sprintf("spec: featureSet %s, customNoUpgrade enabled %v disabled %v", set, sets.List(ce), sets.List(cd)))
	start := time.Now()
	for _, tv := range offsets(f.rng, f.versions()) {
		if err := harness.Wait(ctx, time.Until(start.Add(tv.after))); err != nil {
			return err
		}
		if err := f.writeEntries(ctx, func(e map[string]Entry) { e[tv.version] = Entry{Enabled: enabled.Clone()} }); err != nil {
			return err
		}
		log("status: entry " + tv.version + " rewritten")
	}
	return nil
}

// ToTechPreview is change (a): Default → TechPreviewNoUpgrade.
func (f *Fleet) ToTechPreview(ctx context.Context) (Phase, error) {
	return f.run(ctx, "Default → TechPreviewNoUpgrade", func(ctx context.Context, log func(string)) error {
		return f.switchEntries(ctx, log, configv1.TechPreviewNoUpgrade, nil, nil, f.Gates.TechPreview)
	})
}

// Upgrade is change (b): versionNext's entry is added (the current feature
// set's lists), every adopter on versionOld is rolled onto it (the
// harness's restarts) and Ready, and versionOld's entry is removed.
func (f *Fleet) Upgrade(ctx context.Context) (Phase, error) {
	return f.run(ctx, "upgrade "+versionOld+" → "+versionNext, func(ctx context.Context, log func(string)) error {
		cur := f.entries[versionCurrent]
		if err := f.writeEntries(ctx, func(e map[string]Entry) { e[versionNext] = Entry{Enabled: cur.Enabled.Clone()} }); err != nil {
			return err
		}
		log("status: entry " + versionNext + " added")
		var moved []*Adopter
		for _, a := range f.Adopters {
			if a.Version() == versionOld {
				moved = append(moved, a)
			}
		}
		var wg sync.WaitGroup
		for _, a := range moved {
			wg.Go(func() { a.Move(versionNext) })
		}
		wg.Wait()
		if err := poll(ctx, f.settleTimeout(), 250*time.Millisecond, func() (bool, string) {
			for _, a := range moved {
				if !a.Ready() {
					return false, a.Spec.Name + " not Ready on " + versionNext
				}
			}
			return true, ""
		}); err != nil {
			return err
		}
		log(fmt.Sprintf("%d adopters rolled onto %s and Ready", len(moved), versionNext))
		if err := f.writeEntries(ctx, func(e map[string]Entry) { delete(e, versionOld) }); err != nil {
			return err
		}
		log("status: entry " + versionOld + " removed")
		return nil
	})
}

// ToCustom recreates the FeatureGate as CustomNoUpgrade with the
// TechPreviewNoUpgrade gates (the CRD forbids leaving TechPreviewNoUpgrade,
// so the fleet is stopped and started again around it: no change counted).
func (f *Fleet) ToCustom(ctx context.Context) error {
	ce := f.Gates.TechPreview.Difference(f.Gates.Default)
	entries := map[string]Entry{}
	for _, v := range f.versions() {
		entries[v] = Entry{Enabled: f.Gates.TechPreview.Clone()}
	}
	if err := f.recreate(ctx, configv1.CustomNoUpgrade, ce, sets.New[string](), entries); err != nil {
		return fmt.Errorf("recreate FeatureGate as CustomNoUpgrade: %w", err)
	}
	return f.Settle(ctx)
}

// FlipGate is change (c): gate flipped in spec.customNoUpgrade, each
// version's entry rewritten after.
func (f *Fleet) FlipGate(ctx context.Context, name, gate string) (Phase, error) {
	return f.run(ctx, name, func(ctx context.Context, log func(string)) error {
		ce, cd, enabled := f.flipped(gate)
		log("flip " + gate)
		return f.switchEntries(ctx, log, configv1.CustomNoUpgrade, ce, cd, enabled)
	})
}

// flipped is the custom lists and entry with gate's state reversed.
func (f *Fleet) flipped(gate string) (ce, cd, enabled sets.Set[string]) {
	ce, cd = f.customEnabled.Clone(), f.customDisabled.Clone()
	enabled = f.entries[versionCurrent].Enabled.Clone()
	if enabled.Has(gate) {
		ce.Delete(gate)
		cd.Insert(gate)
		enabled.Delete(gate)
	} else {
		cd.Delete(gate)
		ce.Insert(gate)
		enabled.Insert(gate)
	}
	return ce, cd, enabled
}

// flipCandidate picks, seeded, a gate some adopters watch by name and
// others do not: not Common, which every adopter consumes.
func (f *Fleet) flipCandidate() string {
	watched := sets.New[string]()
	for _, a := range f.Adopters {
		watched.Insert(a.Spec.Watched...)
	}
	watched.Delete(f.Gates.Common)
	if watched.Len() == 0 {
		return f.Gates.Names[f.rng.IntN(len(f.Gates.Names))]
	}
	names := sets.List(watched)
	return names[f.rng.IntN(len(names))]
}
