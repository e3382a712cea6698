// Package featuregate gives a controller-runtime operator the OpenShift
// FeatureGate discipline: read the cluster's feature configuration once at
// start, never guess it, and restart when it changes.
//
// Before the initial read succeeds the process is alive but not ready; after
// it, every reconcile of the FeatureGate compares the live object with the
// startup Snapshot (level-triggered: the first reconcile after the cache
// syncs is such a comparison too), and any difference asks the Stopper to end
// the manager gracefully so that a fresh process reads the new value.
//
// Wiring it into main.go takes a few lines:
//
//	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
//	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{
//		MapperProvider: featuregate.MapperProvider, // start while the API is down
//		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
//			&configv1.FeatureGate{}: {Field: fields.OneTermEqualSelector("metadata.name", "cluster")},
//		}},
//		LeaderElectionReleaseOnCancel: true,
//	})
//	startup := featuregate.NewStartup(mgr.GetAPIReader(), featuregate.Options{Version: version})
//	stopper := featuregate.NewStopper(cancel)
//	_ = mgr.Add(startup)
//	_ = mgr.Add(stopper)
//	_ = mgr.AddReadyzCheck("featuregate", startup.Check)
//	// the FeatureGate controller, wrapped in startup.AfterSnapshot, compares
//	// featuregate.New(live, opts) with the snapshot and calls stopper.Stop
//	// with strings.Join(featuregate.Diff(snapshot, live), "; ").
//	if err := mgr.Start(ctx); err != nil { os.Exit(1) }
//	// a requested stop is a clean exit: the kubelet restarts us
package featuregate
