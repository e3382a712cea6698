package fleet

import (
	"encoding/json"
	"math"
	"testing"
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
