package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Decision is the answer to one request: what the component decides on,
// taken from the snapshot at the moment the guard vouched for it.
type Decision struct {
	FeatureSet string `json:"featureSet"`
	Gate       string `json:"gate"`
	Enabled    bool   `json:"enabled"`
}

// decider answers each request from the snapshot, asking Current first:
// a component that decides per request (an admission webhook, an API
// handler) must look at the guard for every decision, not once per
// reconcile. A request the guard cannot vouch for is refused with 503 and
// a Retry-After, never answered from a view that may be stale.
type decider struct {
	gates featuregate.Gates
	gate  configv1.FeatureGateName
}

func (d decider) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if !d.gates.Current() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "FeatureGate not current", http.StatusServiceUnavailable)
		return
	}
	snapshot, _ := d.gates.Snapshot() // taken: Current says so
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Decision{FeatureSet: snapshot.FeatureSetName(), Gate: string(d.gate), Enabled: d.gates.Enabled(d.gate)})
}

// serveDecisions serves /decide on addr until ctx ends: a manager Runnable
// that every replica runs, leader or not.
type serveDecisions struct {
	addr string
	decider
}

func (s serveDecisions) NeedLeaderElection() bool { return false }

func (s serveDecisions) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /decide", s.decider)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
