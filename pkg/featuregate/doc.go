// Package featuregate gives a controller-runtime operator the OpenShift
// FeatureGate discipline: read the cluster's feature configuration at
// start, never guess it, never act on it once it cannot be vouched for, and
// restart when it changes.
//
// A Guard does all of it. Without a controller-runtime manager,
// Guard.Run runs its core (the read, the monitor, the stop) from a plain
// context, with Guard.Check for readiness. With one: NewGuard, then
// Guard.NewManager in place of ctrl.NewManager; the rest of the operator is written the kubebuilder way
// (ctrl.NewControllerManagedBy(mgr), its own cached types, field indexes),
// and starts once the startup snapshot is taken. Before the initial read
// succeeds the process is alive but not ready (/readyz/featuregate, the
// check CheckName, says what it waits for: "initial FeatureGate not read
// yet"; each failed read's error is in the log line "FeatureGate not read;
// no feature set assumed, retrying"); the read is retried whatever the
// error, because a FeatureGate that could not be read is no feature set at
// all.
// Once read, the snapshot is frozen.
//
// # The held manager
//
// The manager's own paths an operator's code acts through are held too:
// GetCache().WaitForCacheSync waits for the snapshot and the cache built
// from it, writes through GetClient() wait for the snapshot (and fail at
// once before Start, which waiting would block), and Elected closes once
// the replica leads and that cache serves. Once a stop is requested, those
// writes are refused.
//
// # Level-triggered comparison and the stop
//
// After that the guard keeps checking, level-triggered: every reconcile of
// its FeatureGate controller compares the live object with the snapshot,
// and a monitor reads it live and follows it (a watch from that read, or
// the file) so that a change made during or just after an API outage is
// seen as soon as it can be read. A difference in what the component
// consumes is logged ("FeatureGate changed; requesting shutdown", keys diff,
// detectedBy "reconcile", "verify" or "freshness"), recorded as a FeatureGateChanged Event, and ends the
// manager gracefully: Start returns nil, the process exits 0, and its
// restart reads the new value. A feature-set change seen under
// Options.WatchFeatureSet logs "FeatureGate feature set changed; work
// stopped, exit held until the status entry of the release version is
// rewritten" instead, then "FeatureGate status entry caught up with the
// feature set; stopping" once the entry is rewritten, or "FeatureGate
// status entry not rewritten in time; stopping all the same" when the
// hold ends.
//
// Which changes restart: a change of the state of a gate the component
// consumes (every gate of its release version's status.featureGates entry,
// or only Options.WatchedGates; without a Version, of spec.customNoUpgrade),
// and, only with Options.WatchFeatureSet, of spec.featureSet. Nothing else
// does: not another version's entry, not the custom lists while a Version
// is set (the entry rewritten from them does), not labels or conditions.
// OpenShift switches a feature set in two writes, spec.featureSet and then
// cluster-config-operator's rewrite of its own version's entry; a gate
// consumer restarts at most once, at the rewrite, and a feature-set
// consumer stops its work at the first write but holds its exit until its
// entry is rewritten (10 s at most), so that it restarts once and never
// onto the new feature set over the old set's gates. A feature-set
// consumer that takes a snapshot whose status is older than its spec (it
// started between the writes) does not vouch for it until the status is
// written again (entry.go).
//
// # Acting on the snapshot: Gates and the freshness proof
//
// Code that acts on the feature set depends on the Gates interface: it asks
// Enabled, and checks Current right before each action (the write, or the
// answer to a request), since the view can change while Reconcile runs. A
// reconciler whose gate is off acts on nothing and need not ask Current;
// asking is what keeps the proof's reads going (see below), so ask
// where you act, not in a loop of your own.
// The guarantee, with its number: Current answers true only if an
// API server that reached etcd answered, at most Options.FreshnessBound
// (2 s by default) before the question, a consistent read of the
// FeatureGate that matched the snapshot. An open watch alone is no such
// proof (a dead link, a frozen API server and one cut off from etcd all
// look like a quiet watch), so the guard sends that read every half bound
// on a connection of its own, as a leader renews its lease, while anything
// asks Current: a guard nobody asked for 5 bounds reads nothing, and the
// next Current waits for one read before it answers. Current is
// also false before the snapshot is taken, while the guard has lost track
// of the FeatureGate, and once a stop is requested; the answer then is to
// requeue, never to act. Readiness does not follow it: it is about the
// snapshot, not about the API's health. Unit tests give such code a
// featuregatetest.Gates instead of the guard.
//
// Controllers that exist only when a gate is enabled are registered in
// Options.Setup, which runs once the snapshot is taken; before it, Enabled
// is false for every gate. The guard restarts the process on a change and
// offers no live mode: a snapshot that changes under a running reconciler
// would make every decision a race between two reads.
//
// # Sources: the API or a file
//
// Options.File reads the FeatureGate from a file (HyperShift renders it into
// a ConfigMap volume; MicroShift has no FeatureGate API) with the same
// discipline; featuregatetest.File changes such a file in a test, for a
// hermetic test of a whole manager's stop on change. Read is the one
// reader of a FeatureGate, for tools that answer for a cluster the way the
// guard would.
//
// # Parts: the TLS profile, and an operator's own
//
// Options.TLSProfile adds the cluster's TLS security profile (the
// APIServer's spec.tlsSecurityProfile, resolved, and spec.tlsAdherence) to
// the snapshot, with the same discipline: not ready until it is read (or,
// where there is no APIServer, the fallback Options.TLSProfile.Absent names
// is taken; without one the guard waits), a change of what the component
// serves with stops the manager (detectedBy "reconcile", "verify" or
// "freshness", a
// TLSProfileChanged Event on the APIServer), and Current vouches for it
// with the FeatureGate, each proof one consistent read of both.
// Guard.TLSOpts, in the metrics and webhook servers' TLSOpts, fails every
// handshake until the profile is read and then serves it, so nothing is
// ever negotiated under a profile that was assumed.
//
// Options.Parts adds an operator's own config objects the same way: NewPart
// takes an object's name and a projection of it to a comparable value (the
// Infrastructure's topology, say), and the guard reads it before it is
// ready, follows it with a watch of its own, proves it with the
// FeatureGate, and stops on a change of the projection, not of the rest of
// the object (a SnapshotPartChanged Event on it). ObjectPart.Value reads
// it from the snapshot.
//
// # Where each concept lives
//
//   - the Guard, built in one place: guard.go (NewGuard), options.go
//   - the startup read behind readiness: startup.go; the snapshot: snapshot.go
//   - sources of the FeatureGate: source.go, apisource.go (with the
//     guard's own connections every live read uses), file.go; conns.go
//     closes every connection the guard dialed
//   - parts: part.go (what every part does), tlspart.go, tlsprofile.go,
//     tlscontroller.go and tlsopts.go (the TLS profile), objectpart.go (an
//     operator's own)
//   - the comparison and what restarts: comparison.go, consumed.go,
//     entry.go, controller.go (the FeatureGate controller)
//   - the monitor and the freshness proof: monitor.go, proof.go
//   - the stop: stopper.go; Events and metrics: events.go
//   - the held manager: manager.go, heldmanager.go, cache.go, lease.go;
//     the core without one: run.go
//
// # RBAC and versions
//
// The guard needs RBAC to get, list and watch featuregates
// (config.openshift.io), to create and patch events (events.k8s.io) unless
// Options.EventRecorder records them, and, when Options.Version is the
// placeholder, to get the clusterversion "version", and with
// Options.TLSProfile to get, list and watch apiservers (and, for each of
// Options.Parts, to list and watch its kind); the package's
// +kubebuilder:rbac markers say exactly that, for controller-gen, and
// config/rbac/role.yaml of this module is the ClusterRole they generate,
// for RBAC written by hand. Without Events the guard logs that once and
// goes on.
//
// The package is a Go module of its own whose go.mod states the lowest
// versions it supports (Go 1.25, controller-runtime v0.23, k8s.io v0.35);
// it is tested at each controller-runtime minor from there to the newest.
package featuregate
