package fleet

import (
	"slices"
	"strconv"
	"time"
)

// Dist is a distribution's summary.
type Dist struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	P100 time.Duration `json:"p100"`
}

// summarize takes nearest-rank percentiles.
func summarize(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Dist{N: len(s), P50: rank(0.50), P99: rank(0.99), P100: s[len(s)-1]}
}

func (d Dist) String() string {
	if d.N == 0 {
		return "none"
	}
	r := func(x time.Duration) time.Duration { return x.Round(time.Millisecond) }
	return "p50 " + r(d.P50).String() + ", p99 " + r(d.P99).String() + ", p100 " + r(d.P100).String() + " (n=" + strconv.Itoa(d.N) + ")"
}
