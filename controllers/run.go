package controllers

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// The Applier's runs: what one pass over the payload did (Run, from the
// outcome of each action), and what of it is kept between runs to report
// and restore the ClusterOperator (runStatus, lastRun).

// Run is the outcome of one pass over the directory.
type Run struct {
	// Applied are the manifests whose objects are in place as the payload
	// says: applied, found unchanged, or created or left alone when
	// create-only; with the namespace the server's scope gave them.
	Applied []manifest.Manifest
	// Unchanged counts the applied manifests whose objects were found as
	// this process last applied them, and so were not sent again.
	Unchanged int
	// Created counts the create-only objects created by this run;
	// CreateOnlyLeft those that existed and were left alone.
	Created, CreateOnlyLeft int
	// Deleted are the manifests marked for deletion whose objects are now
	// deleted (or being deleted, or already gone).
	Deleted []manifest.Manifest
	Failed  []error
	// Invalid are the files and documents that could not be read, the
	// duplicates, and the manifests whose annotations are invalid (a delete
	// annotation other than "true").
	Invalid  []error
	Excluded int
	// Skipped are the directory entries that are not manifests.
	Skipped []manifest.Skipped
	// Inputs are the cluster's inclusion inputs this run decided with.
	Inputs   clusterinputs.Inputs
	Duration time.Duration
	// Aborted is set when a stop was requested, the FeatureGate no longer
	// matches the snapshot, or ctx ended, before the run finished.
	Aborted bool
	// Postponed is set when the guard could not vouch for the snapshot
	// before a write (its proof older than the freshness bound): what was
	// left is not sent, and the run is made again once it can.
	Postponed bool
}

// outcome is what one action did.
type outcome struct {
	// manifest is the one acted on, with its namespace as scoped.
	manifest manifest.Manifest
	// created: a create-only object was created; leftAlone: it existed.
	created, leftAlone bool
	deleted            bool
	// unchanged: found as last applied, not sent.
	unchanged bool
}

// add counts the outcome of one action.
func (r *Run) add(o outcome, err error) {
	switch {
	case errors.Is(err, errStopped):
	case errors.Is(err, errNotCurrent):
		r.Postponed = true
	case err != nil:
		r.Failed = append(r.Failed, err)
	case o.deleted:
		r.Deleted = append(r.Deleted, o.manifest)
	default:
		r.Applied = append(r.Applied, o.manifest)
		if o.created {
			r.Created++
		}
		if o.leftAlone {
			r.CreateOnlyLeft++
		}
		if o.unchanged {
			r.Unchanged++
		}
	}
}

// runStatus is what the ClusterOperator reports of a run: counts and names,
// not the run's objects, so that it is cheap to keep between runs.
type runStatus struct {
	applied, createOnlyLeft, deleted, failed int
	problems                                 []string // invalid, then failed
	namespaces                               []string
	capabilityFilter                         string
}

func (r Run) runStatus() runStatus {
	o := runStatus{applied: len(r.Applied), createOnlyLeft: r.CreateOnlyLeft, deleted: len(r.Deleted), failed: len(r.Failed),
		namespaces: appliedNamespaces(r.Applied), capabilityFilter: r.Inputs.Filter()}
	for _, err := range append(append([]error{}, r.Invalid...), r.Failed...) {
		o.problems = append(o.problems, err.Error())
	}
	return o
}

// lastRun is what the ClusterOperator is restored from between runs.
type lastRun struct {
	snap   featuregate.Snapshot
	status runStatus
}

// appliedNamespaces are the namespaces a run created or wrote into.
func appliedNamespaces(ms []manifest.Manifest) []string {
	ns := sets.New[string]()
	for _, m := range ms {
		if m.Object.GetKind() == "Namespace" && m.Object.GetAPIVersion() == "v1" {
			ns.Insert(m.Object.GetName())
		} else if n := m.Object.GetNamespace(); n != "" {
			ns.Insert(n)
		}
	}
	return sets.List(ns)
}
