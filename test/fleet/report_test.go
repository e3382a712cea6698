package fleet

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFleetReport is `make fleet`: the restart changes (asserted as in
// TestFleetRestarts), a stampede and the idle and busy cost, written to
// -fleet.report. A failed assertion still writes the report, with the
// failures in it.
func TestFleetReport(t *testing.T) {
	if *flagReport == "" {
		t.Skip("-fleet.report not set (make fleet sets it)")
	}
	path, err := filepath.Abs(*flagReport)
	if err != nil {
		t.Fatal(err)
	}
	f := New(t, Config{N: *flagN, Seed: seed(t), Settle: *flagSettle, Consumer: bins.consumer})
	r := Report{Seed: f.cfg.Seed, N: f.cfg.N, Settle: f.cfg.Settle, Measured: time.Now()}
	for _, a := range f.Adopters {
		r.Adopters = append(r.Adopters, a.Spec)
	}
	defer func() {
		if err := r.Write(path); err != nil {
			t.Error(err)
		}
		t.Logf("report written to %s", path)
		if *flagBenchmarks != "" && len(r.Failures) == 0 && !t.Failed() {
			if err := r.Splice(*flagBenchmarks); err != nil {
				t.Error(err)
			}
			t.Logf("Fleet section of %s replaced", *flagBenchmarks)
		}
	}()
	r.Phases = f.restartPhases(t)
	t.Logf("restarts per change:\n%s", restartTable(r.Phases))
	assertTargets(t, r.Phases)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	if r.Stampede, err = f.Stampede(ctx); err != nil {
		r.Failures = append(r.Failures, "stampede: "+err.Error())
		f.fail(t, "stampede", err)
	}
	t.Logf("stampede: all Ready %s after the write; tail %s; API %s; lapses %d; CPU busy %.0f%%", r.Stampede.AllReady, r.Stampede.Tail, r.Stampede.API, r.Stampede.Lapses, r.Stampede.Busy*100)
	// The same stampede on the guard with nothing else to do, and on
	// library-go's FeatureGateAccess with nothing else to do.
	r.BareStampede = f.stampedeAs(ctx, t, &r, "bare", func() { f.AsBare(bins.bare) })
	r.LibraryGoStampede = f.stampedeAs(ctx, t, &r, "library-go", func() { f.AsLibraryGo(bins.idle) })
	f.StopAll()
	if r.Costs, err = f.Costs(ctx, bins.idle, f.cfg.N, *flagWindow); err != nil {
		r.Failures = append(r.Failures, "cost: "+err.Error())
		t.Fatalf("cost: %v", err)
	}
	if r.ReadCosts, err = f.ReadCosts(ctx, 3, 1000); err != nil {
		r.Failures = append(r.Failures, "read cost: "+err.Error())
		t.Fatalf("read cost: %v", err)
	}
}

func TestReadyChartCountsAdoptersByHalfSecond(t *testing.T) {
	got := readyChart([]time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 1200 * time.Millisecond, 1200 * time.Millisecond}, 4)
	want := "  0.5s |##########                              | 1/4\n" +
		"  1.0s |####################                    | 2/4\n" +
		"  1.5s |########################################| 4/4\n"
	if got != want {
		t.Fatalf("chart:\n%s\nwant\n%s", got, want)
	}
}

// stampedeAs stops the fleet, replaces its adopters (swap), starts and
// settles them, and runs the stampede on them; a failure is recorded in r
// and ends t.
func (f *Fleet) stampedeAs(ctx context.Context, t *testing.T, r *Report, name string, swap func()) Stampede {
	t.Helper()
	f.StopAll()
	swap()
	f.Start()
	if err := f.Settle(ctx); err != nil {
		r.Failures = append(r.Failures, name+" fleet: "+err.Error())
		f.fail(t, name+" fleet", err)
	}
	st, err := f.Stampede(ctx)
	if err != nil {
		r.Failures = append(r.Failures, name+" stampede: "+err.Error())
		f.fail(t, name+" stampede", err)
	}
	t.Logf("%s stampede: all Ready %s after the write; tail %s; API %s; CPU busy %.0f%%", name, st.AllReady, st.Tail, st.API, st.Busy*100)
	return st
}

// TestFleetRender is `make fleet-render`: it writes a report again from
// its JSON (-fleet.render), and splices it as -fleet.benchmarks asks,
// without running a fleet.
func TestFleetRender(t *testing.T) {
	if *flagRender == "" {
		t.Skip("-fleet.render not set")
	}
	data, err := os.ReadFile(*flagRender)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", *flagRender, err)
	}
	if err := r.Write(strings.TrimSuffix(*flagRender, ".json") + ".md"); err != nil {
		t.Fatal(err)
	}
	if *flagBenchmarks != "" {
		if err := r.Splice(*flagBenchmarks); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProofCostSaysTheBoundForATenthOfACore(t *testing.T) {
	got := proofCost([]Cost{
		{Name: nameIdleGuard, N: 10, Window: time.Minute, ServerCPU: time.Second},
		{Name: nameBusyGuard, N: 10, Window: time.Minute, ServerCPU: time.Second + 1200*time.Millisecond},
	})
	// 600 reads, 2 ms each: 180 replicas 0.36 core; 0.1 core allows 0.28
	// reads a second each (bound 7.2 s) or 50 replicas.
	for _, want := range []string{"600 consistent reads", "2.00 ms", "0.36 of a core", "0.28 reads a second", "7.2 s", "50 replicas asking"} {
		if !strings.Contains(got, want) {
			t.Errorf("proofCost lacks %q:\n%s", want, got)
		}
	}
}
