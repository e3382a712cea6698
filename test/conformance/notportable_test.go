package conformance_test

// notPortable are upstream's specs left out: each needs what only package
// manager itself can reach (an unexported type, field, option or
// function), so it cannot be run from outside against either manager. They
// are the same at v0.23.3 and v0.25.2. Keyed by spec name as specName
// gives it (containers below the mode, then the spec's text).
var notPortable = map[string]string{
	// New
	"manger.Manager New should return an error it can't create a recorder.Provider":                                                                                     "Options.newRecorderProvider",
	"manger.Manager New with leader election enabled should only cancel the leader election after all runnables are done":                                               "*controllerManager: gracefulShutdownTimeout, onStoppedLeading",
	"manger.Manager New with leader election enabled should disable gracefulShutdown when stopping to lead":                                                             "*controllerManager: elected, leaderElectionCancel, gracefulShutdownTimeout",
	"manger.Manager New with leader election enabled should prevent leader election when shutting down a non-elected manager":                                           "Options.newResourceLock; *controllerManager.onStoppedLeading",
	"manger.Manager New with leader election enabled should default RenewDeadline for leader election config":                                                           "Options.newResourceLock",
	"manger.Manager New with leader election enabled should default ID to controller-runtime if ID is not set":                                                          "Options.newResourceLock; *controllerManager.onStoppedLeading",
	"manger.Manager New with leader election enabled should return an error if it can't create a ResourceLock":                                                          "Options.newResourceLock",
	"manger.Manager New with leader election enabled should default to LeasesResourceLock":                                                                              "*controllerManager.resourceLock",
	"manger.Manager New with leader election enabled should use the specified ResourceLock":                                                                             "*controllerManager.resourceLock",
	"manger.Manager New with leader election enabled should release lease if ElectionReleaseOnCancel is true":                                                           "Options.newResourceLock; *controllerManager.elected",
	"manger.Manager New with leader election enabled should set the leaselocks's label field when LeaderElectionLabels is set":                                          "*controllerManager.resourceLock",
	"manger.Manager New with leader election enabled when using a custom LeaderElectionResourceLockInterface should use the custom LeaderElectionResourceLockInterface": "Options.newResourceLock; *controllerManager.resourceLock",
	"manger.Manager New should create a metrics server if a valid address is provided":                                                                                  "Options.newMetricsServer",
	"manger.Manager New should create a metrics server if a valid address is provided and secure serving is enabled":                                                    "Options.newMetricsServer",
	"manger.Manager New should return an error if the metrics bind address is already in use":                                                                           "Options.newMetricsServer",
	"manger.Manager New should return an error if the metrics bind address is already in use and secure serving enabled":                                                "Options.newMetricsServer",
	"manger.Manager New should create a listener for the health probes if a valid address is provided":                                                                  "Options.newHealthProbeListener, defaultHealthProbeListener",
	"manger.Manager New should return an error if the health probes bind address is already in use":                                                                     "Options.newHealthProbeListener, defaultHealthProbeListener",

	// Start, with defaults
	"manger.Manager Start with defaults should return an error if it can't start the cache":                      "m.(*controllerManager) asserted (ok must be true)",
	"manger.Manager Start with defaults should return both runnables and stop errors when both error":            "*controllerManager.gracefulShutdownTimeout",
	"manger.Manager Start with defaults should return only stop errors if runnables dont error":                  "*controllerManager: gracefulShutdownTimeout, elected",
	"manger.Manager Start with defaults should not wait for runnables if gracefulShutdownTimeout is 0":           "*controllerManager.gracefulShutdownTimeout",
	"manger.Manager Start with defaults should wait forever for runnables if gracefulShutdownTimeout is <0 (-1)": "*controllerManager.gracefulShutdownTimeout",

	// Start, with leader election: the context's options set
	// Options.newResourceLock (the fake lock) and its callback sets
	// *controllerManager.onStoppedLeading, for every spec of startSuite.
	"manger.Manager Start with leaderelection enabled should Start each Component":                                                           leStartSuite,
	"manger.Manager Start with leaderelection enabled should not manipulate the provided config":                                             leStartSuite,
	"manger.Manager Start with leaderelection enabled should stop when context is cancelled":                                                 leStartSuite,
	"manger.Manager Start with leaderelection enabled should return an error if it can't start the cache":                                    leStartSuite,
	"manger.Manager Start with leaderelection enabled should start the cache before starting anything else":                                  leStartSuite,
	"manger.Manager Start with leaderelection enabled should start additional clusters before anything else":                                 leStartSuite,
	"manger.Manager Start with leaderelection enabled should return an error if any Components fail to Start":                                leStartSuite,
	"manger.Manager Start with leaderelection enabled should start caches added after Manager has started":                                   leStartSuite,
	"manger.Manager Start with leaderelection enabled should wait for runnables to stop":                                                     leStartSuite,
	"manger.Manager Start with leaderelection enabled should return an error if any Components fail to Start and wait for runnables to stop": leStartSuite,
	"manger.Manager Start with leaderelection enabled should refuse to add runnable if stop procedure is already engaged":                    leStartSuite,
	"manger.Manager Start with leaderelection enabled should not return runnables context.Canceled errors":                                   leStartSuite,
	"manger.Manager Start with leaderelection enabled should default controller logger from manager logger":                                  leStartSuite,
	"manger.Manager Start with leaderelection enabled should return both runnables and stop errors when both error":                          leStartSuite,
	"manger.Manager Start with leaderelection enabled should return only stop errors if runnables dont error":                                leStartSuite,
	"manger.Manager Start with leaderelection enabled should return only runnables error if stop doesn't error":                              leStartSuite,
	"manger.Manager Start with leaderelection enabled should not wait for runnables if gracefulShutdownTimeout is 0":                         leStartSuite,
	"manger.Manager Start with leaderelection enabled should wait forever for runnables if gracefulShutdownTimeout is <0 (-1)":               leStartSuite,
	"manger.Manager Start with leaderelection enabled should return an error if leader election param incorrect":                             "Options.newResourceLock",

	// Start, metrics: the context's BeforeEach captures the server through
	// Options.newMetricsServer, for its bound address.
	"manger.Manager Start should start serving metrics should stop serving metrics when stop is called":                  "Options.newMetricsServer",
	"manger.Manager Start should start serving metrics should serve metrics endpoint":                                    "Options.newMetricsServer",
	"manger.Manager Start should start serving metrics should not serve anything other than metrics endpoint by default": "Options.newMetricsServer",
	"manger.Manager Start should start serving metrics should serve metrics in its registry":                             "Options.newMetricsServer",
	"manger.Manager Start should start serving metrics should serve extra endpoints":                                     "Options.newMetricsServer",

	// Health probes and pprof: the contexts' BeforeEach captures the
	// listener, for its bound address.
	"manger.Manager should start serving health probes should stop serving health probes when stop is called": "Options.newHealthProbeListener, defaultHealthProbeListener",
	"manger.Manager should start serving health probes should serve readiness endpoint":                       "Options.newHealthProbeListener, defaultHealthProbeListener, defaultReadinessEndpoint",
	"manger.Manager should start serving health probes should serve liveness endpoint":                        "Options.newHealthProbeListener, defaultHealthProbeListener, defaultLivenessEndpoint",
	"manger.Manager should start serving pprof should stop serving pprof when stop is called":                 "Options.newPprofListener, defaultPprofListener",
	"manger.Manager should start serving pprof should serve pprof endpoints":                                  "Options.newPprofListener, defaultPprofListener",

	// Add
	"manger.Manager Add should immediately start the Component if the Manager has already Started another Component": "*controllerManager.runnables",
	"manger.Manager Add should immediately start the Component if the Manager has already Started":                   "*controllerManager.runnables",
	"manger.Manager Add should fail if attempted to start a second time":                                             "*controllerManager.runnables",

	// Getters, compared with the manager's unexported cluster
	"manger.Manager should provide a function to get the Config":       "*controllerManager.cluster",
	"manger.Manager should provide a function to get the Client":       "*controllerManager.cluster",
	"manger.Manager should provide a function to get the Scheme":       "*controllerManager.cluster",
	"manger.Manager should provide a function to get the FieldIndexer": "*controllerManager.cluster",

	// Warmup
	"manger.Manager should run warmup runnables before leader election is won": "Options.newResourceLock, *controllerManager.resourceLock, newWarmupRunnableFunc",
}

const leStartSuite = "Options.newResourceLock; *controllerManager.onStoppedLeading"
