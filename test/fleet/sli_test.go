package fleet

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestHistogramQuantileBoundAndSince(t *testing.T) {
	before := histogram{Bounds: []float64{0.1, 0.5, 1}, Counts: []uint64{10, 10, 10}, N: 10}
	after := histogram{Bounds: []float64{0.1, 0.5, 1}, Counts: []uint64{60, 108, 109}, N: 110}
	d := after.since(before)
	if d.total() != 100 {
		t.Fatalf("total %d, want 100", d.total())
	}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0.5, 0.1}, {0.9, 0.5}, {0.98, 0.5}, {0.99, 1}, {1, math.Inf(1)}} {
		if got := d.quantileBound(tc.q); got != tc.want {
			t.Errorf("quantile %v: bound %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (histogram{}).String(); got != "none" {
		t.Errorf("empty histogram %q", got)
	}
	if _, err := json.Marshal(d); err != nil {
		t.Errorf("JSON: %v", err)
	}
	if got := d.String(); got != "p50 ≤ 0.1s, p99 ≤ 1s (n=100)" {
		t.Errorf("String %q", got)
	}
}

func TestRequestCountsByVerbAndResource(t *testing.T) {
	text := `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="config.openshift.io",resource="featuregates",scope="cluster",subresource="",verb="LIST",version="v1"} 5
apiserver_request_total{code="500",component="apiserver",dry_run="",group="config.openshift.io",resource="featuregates",scope="cluster",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 40
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	after := countRequests(families["apiserver_request_total"])
	before := requestCounts{"LIST featuregates": 2, "POST events": 9}
	got := after.since(before).String()
	if want := "LIST featuregates 4, PATCH pods/status 2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (requestCounts{}).String(); got != "none" {
		t.Errorf("no requests: %q", got)
	}
}
