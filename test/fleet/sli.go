package fleet

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The API server's own latency histograms, read from its /metrics: what a
// client on a starved machine measures is partly its own wait for CPU,
// what the server records is the SLI of Kubernetes' API call latency SLO
// (single-object calls, p99 ≤ 1 s).
const (
	// sliMetric leaves out the time a request waits in priority and
	// fairness queues and in webhooks: the SLO's own measure.
	sliMetric = "apiserver_request_sli_duration_seconds"
	// durationMetric is the whole time the server held the request.
	durationMetric = "apiserver_request_duration_seconds"
)

// histogram is cumulative bucket counts by finite upper bound, and the
// count of every request (the +Inf bucket), summed over the single-object
// calls (scope resource, every verb but the long-running ones).
type histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	N      uint64    `json:"n"`
}

// apiMetrics is both histograms at one moment, the whole request time
// of every call but the long-running ones, any scope. (A list by
// metadata.name, the guard's read, is a single-object GET to the API
// server's metrics; a create is not single-object.)
type apiMetrics struct {
	SLI, Duration, All histogram
	// Requests counts every request by "VERB resource", watches included.
	Requests requestCounts
}

// scrapeAPIMetrics reads the API server's histograms and request counts
// through cfg.
func scrapeAPIMetrics(ctx context.Context, cfg *rest.Config) (apiMetrics, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return apiMetrics{}, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiMetrics{}, fmt.Errorf("API server metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return apiMetrics{}, fmt.Errorf("API server metrics: %w", err)
	}
	return apiMetrics{SLI: calls(families[sliMetric], "resource"), Duration: calls(families[durationMetric], "resource"),
		All: calls(families[durationMetric], ""), Requests: countRequests(families["apiserver_request_total"])}, nil
}

// labelsOf is m's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// longRunning are the verbs the SLO leaves out.
var longRunning = map[string]bool{"WATCH": true, "WATCHLIST": true, "CONNECT": true}

// calls sums f's histograms over the calls of scope ("resource": single
// objects; "": every scope) but the long-running ones.
func calls(f *dto.MetricFamily, scope string) histogram {
	var h histogram
	if f == nil {
		return h
	}
	sum := map[float64]uint64{}
	for _, m := range f.GetMetric() {
		labels := labelsOf(m)
		if (scope != "" && labels["scope"] != scope) || longRunning[labels["verb"]] {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				sum[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
		h.N += m.GetHistogram().GetSampleCount()
	}
	for b := range sum {
		h.Bounds = append(h.Bounds, b)
	}
	slices.Sort(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, sum[b])
	}
	return h
}

// since is the requests h counts that before did not.
func (h histogram) since(before histogram) histogram {
	out := histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), N: h.N - min(before.N, h.N)}
	for i, b := range h.Bounds {
		var was uint64
		if j := slices.Index(before.Bounds, b); j >= 0 {
			was = before.Counts[j]
		}
		out.Counts[i] = h.Counts[i] - min(was, h.Counts[i])
	}
	return out
}

// total is the number of requests.
func (h histogram) total() uint64 { return h.N }

// quantileBound is the upper bound of the bucket that holds quantile q:
// the histogram says no more than that.
func (h histogram) quantileBound(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	want := uint64(math.Ceil(q * float64(n)))
	for i, c := range h.Counts {
		if c >= want {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// String is the p50 and p99 bounds and the count.
func (h histogram) String() string {
	if h.total() == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 ≤ %s, p99 ≤ %s (n=%d)", seconds(h.quantileBound(0.5)), seconds(h.quantileBound(0.99)), h.total())
}

func seconds(s float64) string {
	if math.IsInf(s, 1) {
		return "∞"
	}
	return fmt.Sprintf("%gs", s)
}

// requestCounts is the API server's request count by "VERB resource".
type requestCounts map[string]uint64

// countRequests sums apiserver_request_total over every label but the verb
// and the resource (and its subresource); requests for no resource
// (/metrics, /readyz) are left out.
func countRequests(f *dto.MetricFamily) requestCounts {
	out := requestCounts{}
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		labels := labelsOf(m)
		if labels["resource"] == "" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += uint64(m.GetCounter().GetValue())
	}
	return out
}

// since is the requests c counts that before did not.
func (c requestCounts) since(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, n := range c {
		if d := n - min(before[k], n); d > 0 {
			out[k] = d
		}
	}
	return out
}

// String is the counts, most first, then by name.
func (c requestCounts) String() string {
	if len(c) == 0 {
		return "none"
	}
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			return cmp.Compare(c[b], c[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	return strings.Join(parts, ", ")
}
