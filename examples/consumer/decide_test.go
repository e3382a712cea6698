package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

func decide(t *testing.T, d decider) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/decide", nil))
	return rec
}

// Each request asks Current: answered from the snapshot while the guard
// vouches for it, refused with 503 otherwise.
func TestDecideAsksCurrentForEachRequest(t *testing.T) {
	gates := featuregatetest.New(configv1.TechPreviewNoUpgrade, "GateA")
	d := decider{gates: gates, gate: "GateA"}

	rec := decide(t, d)
	if rec.Code != http.StatusOK {
		t.Fatalf("current: status %d, want 200", rec.Code)
	}
	var got Decision
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := (Decision{FeatureSet: "TechPreviewNoUpgrade", Gate: "GateA", Enabled: true}); got != want {
		t.Fatalf("decision %+v, want %+v", got, want)
	}

	gates.SetStale(true)
	if rec := decide(t, d); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("not current: status %d, Retry-After %q; want 503 with a Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	gates.SetStale(false)
	gates.Change("feature set changed")
	if rec := decide(t, d); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("after a change: status %d, want 503", rec.Code)
	}
}
