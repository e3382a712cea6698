package main

import (
	"math"
	"slices"
	"time"
)

// summary describes a sample of durations.
type summary struct {
	N                            int
	Min, P50, P95, P99, Max, Avg time.Duration
}

// summarize computes the summary of xs; percentiles interpolate linearly
// between the closest ranks (numpy's default), so that p99 of a small
// sample sits between its two largest values instead of jumping to the max.
func summarize(xs []time.Duration) summary {
	if len(xs) == 0 {
		return summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return summary{
		N:   len(s),
		Min: s[0],
		P50: percentile(s, 50),
		P95: percentile(s, 95),
		P99: percentile(s, 99),
		Max: s[len(s)-1],
		Avg: sum / time.Duration(len(s)),
	}
}

// percentile of sorted, p in [0, 100].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	if lo == hi {
		return sorted[lo]
	}
	frac := rank - float64(lo)
	return sorted[lo] + time.Duration(math.Round(frac*float64(sorted[hi]-sorted[lo])))
}

// ratio is a/b, NaN when b is not positive.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}
