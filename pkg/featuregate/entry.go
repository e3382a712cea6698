package featuregate

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
)

// entryRewriteWait bounds how long after a spec write a feature-set
// consumer waits for the status to be written again before it vouches for
// a snapshot whose status is older than its spec: long enough for
// cluster-config-operator to be restarted and sync (its rewrite is
// otherwise within a second), short enough that a spec write no rewrite
// follows (one that changes no entry) costs a minute or two of Current
// false, not an outage.
const entryRewriteWait = 2 * time.Minute

// entryCheck keeps a feature-set consumer (Options.WatchFeatureSet) from
// vouching for a mixed snapshot: the new spec.featureSet over the release
// version's entry of the old one. OpenShift switches a feature set in two
// writes, the admin's spec, then cluster-config-operator's rewrite of the
// status from it, and nothing in the entry says which feature set it was
// computed for. The object's managedFields do say when each was last
// written: a status last written before the spec may not have caught up.
// A process that takes such a snapshot (it started between the two writes,
// or replaced one whose held exit gave up waiting) keeps Current false
// until a status written since the spec is seen, or entryRewriteWait after
// the spec write. Then the rewrite, if it changed what is consumed,
// restarts the process as any change does; if not, the snapshot was never
// mixed in what the process consumes.
//
// managedFields record seconds: a status written in the same second as the
// spec counts as written after it.
type entryCheck struct {
	wait time.Duration
	log  logr.Logger

	mu sync.Mutex
	// specAt is the spec write the status has not caught up with; zero
	// when nothing is pending.
	specAt time.Time
}

// taken looks at the FeatureGate the snapshot was taken from.
func (e *entryCheck) taken(fg *configv1.FeatureGate, snap Snapshot, now time.Time) {
	if e == nil || fg == nil || !snap.hasStatus {
		return
	}
	spec, status := writtenAt(fg)
	if !status.Before(spec) || !now.Before(spec.Add(e.wait)) {
		return
	}
	e.mu.Lock()
	e.specAt = spec
	e.mu.Unlock()
	e.log.Info("FeatureGate status older than its spec; not vouching for the snapshot until it is written again",
		"featureGate", fg.Name, "featureSet", snap.FeatureSetName(), "version", snap.version,
		"specWritten", spec.UTC().Format(time.RFC3339), "statusWritten", status.UTC().Format(time.RFC3339),
		"waitUntil", spec.Add(e.wait).UTC().Format(time.RFC3339))
}

// seen looks at a live FeatureGate: a status written since the pending
// spec write ends the wait.
func (e *entryCheck) seen(fg *configv1.FeatureGate) {
	if e == nil || fg == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.specAt.IsZero() {
		return
	}
	if _, status := writtenAt(fg); status.Before(e.specAt) {
		return
	}
	e.log.Info("FeatureGate status written since its spec; vouching for the snapshot again", "featureGate", fg.Name,
		"specWritten", e.specAt.UTC().Format(time.RFC3339))
	e.specAt = time.Time{}
}

// pending reports whether the snapshot may be mixed still.
func (e *entryCheck) pending(now time.Time) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.specAt.IsZero() && now.Before(e.specAt.Add(e.wait))
}

// writtenAt is when fg's spec and its status were last written, as its
// managedFields record them (to the second): the newest entry of the main
// resource that owns spec fields, and of the status subresource that owns
// status fields. Zero when they do not say (a FeatureGate from a file).
func writtenAt(fg *configv1.FeatureGate) (spec, status time.Time) {
	for _, m := range fg.ManagedFields {
		if m.Time == nil || m.FieldsV1 == nil {
			continue
		}
		var owned map[string]json.RawMessage
		if json.Unmarshal(m.FieldsV1.Raw, &owned) != nil {
			continue
		}
		switch _, hasSpec := owned["f:spec"]; {
		case m.Subresource == "" && hasSpec:
			spec = latest(spec, m.Time.Time)
		case m.Subresource == "status":
			if _, ok := owned["f:status"]; ok {
				status = latest(status, m.Time.Time)
			}
		}
	}
	return spec, status
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
