package featuregate

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// core is the guard's own work, with a manager or without one: the startup
// read, the stop, and, once the snapshot is taken, the monitor that
// follows the FeatureGate and proves it fresh.
func (g *Guard) core() []manager.Runnable {
	return []manager.Runnable{g.startup, g.stopper, g.startup.AfterSnapshot(g.monitor)}
}

// Run runs the guard without a controller-runtime manager, for a component
// built on something else (library-go's controllercmd, a plain main). It
// reads the FeatureGate, retrying while the API cannot answer, then follows
// it and proves it fresh, until ctx ends or the guard asks for the stop
// (the FeatureGate changed). It returns nil in both cases, once the guard's
// goroutines have ended and its connections are closed; StopReason tells
// the two apart, and StopRequested closes at the request, for the
// component's own work to stop at once. An error is an InitialFetchTimeout
// that ran out, or a misuse.
//
// The component serves Check on its readiness endpoint: not ready until
// the snapshot is taken. Snapshot, Enabled and Current answer as with a
// manager. What Run does not do is what needs a manager: hold the
// component's own writes and controllers until the snapshot (it acts only
// after Snapshot or Current says so), build them from the snapshot
// (Options.Setup) and serve the TLS profile (Options.TLSProfile); either
// option is an error. A guard runs once: Run, or NewManager and its Start.
func (g *Guard) Run(ctx context.Context) error {
	for _, p := range g.parts {
		if m, ok := p.(managerOnly); ok {
			return errors.New("featuregate: Run with " + m.needsManager())
		}
	}
	if g.opts.Setup != nil {
		return errors.New("featuregate: Run with Options.Setup: Setup builds on a manager; without one, act once Snapshot is taken")
	}
	g.mu.Lock()
	built := g.built
	g.built = true
	g.mu.Unlock()
	if built {
		return errors.New("featuregate: Run on a guard already run or given to NewManager")
	}
	// Run's caller serves Check: its doc says so.
	g.startup.readinessServed = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.stopper.starting(cancel)
	var wg sync.WaitGroup
	errs := make(chan error, len(g.core()))
	for _, r := range g.core() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Start(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	// The stop's Events, then the connections, as a manager's Start ends.
	g.closeConnections()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// Check is the guard's readiness for a component run with Run, a
// healthz.Checker (controller-runtime's, and the shape of k8s.io/apiserver's
// HealthChecker's Check): an error saying what is missing until the startup
// snapshot is taken. With NewManager the manager serves it as CheckName.
func (g *Guard) Check(req *http.Request) error { return g.startup.Check(req) }
