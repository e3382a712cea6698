// Command plain is a component without a controller-runtime manager that
// adopts the guard: it runs the guard's core (featuregate.Guard.Run),
// serves its readiness on /readyz, acts only while the guard vouches for
// the feature set it read, and exits 0 when the FeatureGate changes, for
// the kubelet to start it again with the new one. An operator built on
// library-go's controllercmd has the same shape.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

func main() {
	probe := flag.String("health-probe-bind-address", ":8081", "The address /readyz and /healthz are served on.")
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	if err := run(*probe); err != nil {
		log.Error(err, "Exiting")
		os.Exit(1)
	}
}

func run(probe string) error {
	log := ctrl.Log
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	guard, err := featuregate.NewGuard(cfg, featuregate.Options{
		WatchFeatureSet: true,
		EventSource:     "plain",
		Logger:          log.WithName("featuregate"),
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ready := func(w http.ResponseWriter, r *http.Request) {
		if err := guard.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
	// /readyz, and the check by its name as a manager serves it.
	mux.HandleFunc("/readyz", ready)
	mux.HandleFunc("/readyz/"+featuregate.CheckName, ready)
	server := &http.Server{Addr: probe, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.ListenAndServe() }()

	ctx := ctrl.SetupSignalHandler()
	// The work ends with Run, whatever ended Run.
	workCtx, stopWork := context.WithCancel(ctx)
	work := make(chan struct{})
	go func() {
		defer close(work)
		act(workCtx, guard)
	}()
	runErr := guard.Run(ctx)
	stopWork()
	<-work
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if runErr != nil {
		return runErr
	}
	reason, requested := guard.StopReason()
	if !requested {
		reason = "signal"
	}
	log.Info("Graceful shutdown complete", "reason", reason)
	return nil
}

// act is the component's own work: once a second, and only while the guard
// vouches for its snapshot, it acts on the feature set it read. It stops
// when the guard asks for the stop or ctx ends.
func act(ctx context.Context, guard *featuregate.Guard) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-guard.StopRequested():
			return
		case <-tick.C:
		}
		if !guard.Current() {
			continue
		}
		snap, _ := guard.Snapshot()
		ctrl.Log.Info("Acted", "featureSet", snap.FeatureSetName())
	}
}
