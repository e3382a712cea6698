package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// series is one distribution of durations.
type series struct {
	// Label names it in the table; Short in the chart (keep it under 30
	// characters).
	Label, Short string
	Values       []time.Duration
	// Target, when positive, is drawn on the chart.
	Target time.Duration
	// NoChart leaves the series out of the chart: values around or below
	// zero have no place on a log scale.
	NoChart bool
}

func (s *series) add(d time.Duration) { s.Values = append(s.Values, d) }

// check is one of the targets with the measured result.
type check struct {
	Target, Result string
	Met            bool
}

// section is the outcome of one measurement group.
type section struct {
	Name, Title string
	// Method says, in Markdown, what was measured and how.
	Method []string
	Series []*series
	// Rows are other results, as name/value pairs (footprint).
	Rows [][2]string
	// Table is a table of its own, header first (scaling).
	Table [][]string
	// Images are charts of its own, as paths relative to the report.
	Images []string
	Checks []check
	Notes  []string
	// Err is what went wrong; the results gathered before stay valid.
	Err     error
	Elapsed time.Duration
}

type machine struct {
	CPU, Kernel, Go, Commit  string
	CPUs                     int
	MemTotal                 string
	LoadBefore, LoadAfter    string
	ManagerBuiltFromCheckout bool
}

type report struct {
	Machine           machine
	Started, Finished time.Time
	Args              []string
	Runs              int
	Sections          []*section
	Chart             string
}

func describeMachine(root string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAvg()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
				var kib int64
				_, _ = fmt.Sscan(strings.TrimSpace(v), &kib)
				m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load average: how busy the shared
// machine was.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// fmtDur prints a duration with three significant digits in ms or s.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(ms); {
	case a >= 10000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case a >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case a >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

func fmtSummary(s summary) string {
	if s.N == 0 {
		return "no data"
	}
	return fmt.Sprintf("n=%d p50=%s p95=%s p99=%s min=%s max=%s", s.N, fmtDur(s.P50), fmtDur(s.P95), fmtDur(s.P99), fmtDur(s.Min), fmtDur(s.Max))
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	w("# Benchmarks\n\n")
	w("Written by `test/bench` (`make bench`) on %s, in %s. ", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second))
	w("Numbers measure the operator as a process against a real etcd and kube-apiserver (built from source into `bin/k8s`), ")
	w("not mocks; they are not part of `make test` and nothing fails for being slow.\n\n")
	w("> **Noise.** This machine has %d CPUs shared with other engineers' builds and tests (load average %s at the start, %s at the end). ", m.CPUs, m.LoadBefore, m.LoadAfter)
	w("Absolute times are noisy and mostly useful side by side with the peer measured in the same run (the bare watch, kubectl); ")
	w("run it again on an idle machine before quoting a number.\n\n")

	w("## Machine\n\n| | |\n| --- | --- |\n")
	w("| CPU | %s × %d |\n| memory | %s |\n| kernel | Linux %s |\n| Go | %s |\n| commit | %s |\n| arguments | `%s` |\n\n",
		orQ(m.CPU), m.CPUs, orQ(m.MemTotal), orQ(m.Kernel), m.Go, orQ(m.Commit), strings.Join(r.Args, " "))

	w("## Targets\n\n| measurement | target | result | met |\n| --- | --- | --- | --- |\n")
	for _, s := range r.Sections {
		for _, c := range s.Checks {
			met := "**no**"
			if c.Met {
				met = "yes"
			}
			w("| %s | %s | %s | %s |\n", s.Title, c.Target, c.Result, met)
		}
		if len(s.Checks) == 0 && s.Err != nil {
			w("| %s | | not measured: %s | — |\n", s.Title, oneLine(s.Err.Error()))
		}
	}
	w("\n")

	if r.Chart != "" {
		w("## Latency distributions\n\n![latency distributions](%s)\n\n", r.Chart)
		w("One row per series, log scale. Box: p25–p75; thick bar: median; whiskers: min and max; dots: the runs; red mark: the target.\n\n")
	}

	w("## Results\n\nPercentiles interpolate linearly between closest ranks; with n below 100, p99 lies between the two largest runs.\n\n")
	for _, s := range r.Sections {
		w("### %s\n\n", s.Title)
		for _, p := range s.Method {
			w("%s\n\n", p)
		}
		if len(s.Series) > 0 {
			w("| series | n | min | p50 | p95 | p99 | max |\n| --- | --- | --- | --- | --- | --- | --- |\n")
			for _, ser := range s.Series {
				sm := summarize(ser.Values)
				if sm.N == 0 {
					w("| %s | 0 | | | | | |\n", ser.Label)
					continue
				}
				w("| %s | %d | %s | %s | %s | %s | %s |\n", ser.Label, sm.N, fmtDur(sm.Min), fmtDur(sm.P50), fmtDur(sm.P95), fmtDur(sm.P99), fmtDur(sm.Max))
			}
			w("\n")
		}
		if len(s.Table) > 1 {
			w("| %s |\n|%s\n", strings.Join(s.Table[0], " | "), strings.Repeat(" --- |", len(s.Table[0])))
			for _, row := range s.Table[1:] {
				w("| %s |\n", strings.Join(row, " | "))
			}
			w("\n")
		}
		for _, img := range s.Images {
			w("![%s](%s)\n\n", s.Title, img)
		}
		if len(s.Rows) > 0 {
			w("| | |\n| --- | --- |\n")
			for _, row := range s.Rows {
				w("| %s | %s |\n", row[0], row[1])
			}
			w("\n")
		}
		for _, n := range s.Notes {
			w("- %s\n", n)
		}
		if s.Err != nil {
			w("- **Errors** (runs that failed are left out above): %s\n", oneLine(s.Err.Error()))
		}
		w("- Took %s.\n\n", s.Elapsed.Round(time.Second))
	}

	w("## Rerun\n\n```sh\nmake bench                                            # everything, ~15 minutes here; writes BENCHMARKS.md and docs/bench/latency.png\n")
	w("cd test/bench && go run . -runs 9 -only change,apply   # a quick look (its own module; writes ../../BENCHMARKS.md)\n```\n\n")
	w("Flags: `-runs N` (default 30: runs of the change measurement; ready, outage and handover do N/3, handover without release N/6, apply N/6, at least 1), ")
	w("`-only change,ready,outage,apply,handover,kubelet` (footprint is part of apply; a partial run writes a partial report), `-kubelet ../../bin/bench-kubelet.json` (the real-kubelet measurement `make bench-cluster` writes as root; `make bench` runs it first when root), ")
	w("`-manager ../../bin/manager` (default: build the checkout), `-out` (default: BENCHMARKS.md at the repository root), `-chart` (default: docs/bench/latency.png beside -out), `-idle 60s` (footprint CPU window), `-keep` (keep every process's log), `-timeout`.\n")
	return b.String()
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
