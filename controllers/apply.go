package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Apply makes one pass: read the directory and the cluster's inputs,
// decide, then apply or delete run level by run level, each level only
// once the guard vouches for the snapshot (stillCurrent), its manifests
// acted on concurrently (act).
func (a *Applier) Apply(ctx context.Context, snap featuregate.Snapshot) Run {
	started := time.Now()
	// Requests in flight end with the stop, not after it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.Gates.StopRequested():
			cancel()
		case <-ctx.Done():
		}
	}()

	var run Run
	var payload manifest.Payload
	if a.Dir != "" {
		payload = manifest.Scan(a.Dir, a.Scan)
	}
	run.Invalid, run.Skipped = payload.Errors, payload.Skipped
	for _, s := range payload.Skipped {
		a.log().Info("Manifest directory entry skipped", "entry", s.Name, "reason", s.Reason)
	}
	inputs, err := clusterinputs.Read(ctx, a.Reader)
	if err != nil {
		// The capability filter cannot be guessed: nothing is applied.
		run.Failed = append(run.Failed, err)
		run.Aborted = ctx.Err() != nil
		run.Duration = time.Since(started)
		return run
	}
	run.Inputs = inputs
	cluster := inputs.Cluster(snap, a.Profile, a.ExcludeIdentifier, snap.Version())
	decisions, duplicates := manifest.Decide(payload.Manifests, cluster)
	run.Invalid = append(run.Invalid, duplicates...)
	later := sets.New[*unstructured.Unstructured]()
	for _, err := range duplicates {
		if d, ok := errors.AsType[*manifest.DuplicateError](err); ok {
			later.Insert(d.Second.Object) // the first one is applied
		}
	}
	var work []manifest.Manifest
	decided := map[*unstructured.Unstructured]manifest.Decision{}
	for i, m := range payload.Manifests {
		switch d := decisions[i]; {
		case later.Has(m.Object):
		case d.Included || d.Delete:
			work = append(work, m)
			decided[m.Object] = d
		case d.Invalid: // reported by Decide
		default:
			run.Excluded++
		}
	}

	a.mu.Lock()
	rs := newResync(a.Reader, a.log(), a.applied)
	a.mu.Unlock()
	var mu sync.Mutex
	for _, group := range manifest.Groups(work) {
		if !a.stillCurrent(ctx) {
			run.Aborted = a.halted(ctx)
			run.Postponed = !run.Aborted
			break
		}
		sem := make(chan struct{}, max(a.Parallelism, 1))
		var wg sync.WaitGroup
		for _, m := range group {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				out, err := a.act(ctx, m, decided[m.Object], rs)
				mu.Lock()
				defer mu.Unlock()
				run.add(out, err)
			}()
		}
		wg.Wait()
		if run.Postponed {
			break
		}
	}
	if ctx.Err() != nil { // a stop, or the manager's end: not a run to report
		run.Aborted = true
	}
	if !run.Aborted && !run.Postponed {
		a.mu.Lock()
		a.applied = rs.next
		a.mu.Unlock()
	}
	run.Duration = time.Since(started)
	return run
}
