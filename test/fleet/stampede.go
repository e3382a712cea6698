package fleet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

const (
	// proberInterval is the pace of the API latency prober.
	proberInterval = 50 * time.Millisecond
	// stampedeAskInterval is how often the stampede asks each adopter's
	// /decide: a reconcile's pace, enough to keep its proof (the demand
	// window is 5 bounds, 10 s).
	stampedeAskInterval = time.Second
	// maxLapseLines bounds the lapse lines the report keeps.
	maxLapseLines = 10
)

// Stampede is what a change that restarts every adopter costs.
type Stampede struct {
	Phase Phase `json:"phase"`
	// AllReady is the time from the status write that restarts the fleet
	// until every adopter is Ready again (p100 of Ready).
	AllReady time.Duration `json:"allReady"`
	// Ready, Detect, Tail and Start are per adopter: write → Ready again,
	// write → its detection line, detection → process exit (the exit
	// tail), exit → replacement Ready.
	Ready Dist `json:"ready"`
	// ReadyTimes is write → Ready again of every adopter, for the chart.
	ReadyTimes []time.Duration `json:"readyTimes"`
	Detect     Dist            `json:"detect"`
	Tail       Dist            `json:"tail"`
	Start      Dist            `json:"start"`
	// API is the prober's GET latency from the write until all Ready, and
	// Baseline the same before the spec write.
	API      Dist `json:"api"`
	Baseline Dist `json:"baseline"`
	APIFails int  `json:"apiFails"`
	// Lapses counts freshness lapses the replacements logged until settled;
	// LapseLines holds the first few, with their adopter, to attribute them.
	Lapses     int      `json:"lapses"`
	LapseLines []string `json:"lapseLines,omitempty"`
	// SlowTail is the slowest adopter's lines from detection to exit.
	SlowTail     []string `json:"slowTail"`
	SlowTailName string   `json:"slowTailName"`
	// Asked counts the /decide answers during the stampede by status (0:
	// no answer, as while a process restarts): each adopter is asked once
	// a second throughout, a caller relying on Current.
	Asked map[int]int `json:"asked,omitempty"`
	// Busy is the share of the machine's CPU time spent busy from the
	// write until every adopter was Ready: near 1, the stampede waited for
	// CPU, not for the API.
	Busy float64 `json:"busy"`
	// ServerSLI and ServerDuration are the API server's own latency of
	// single-object calls from the write until every adopter was Ready
	// (its histograms' buckets): without the prober's wait for CPU.
	ServerSLI      histogram `json:"serverSLI"`
	ServerDuration histogram `json:"serverDuration"`
	// ServerCalls is the whole request time of every call over the same
	// window but watches, any scope: the SLI's single-object scope leaves
	// out creates (an Event's POST names no object).
	ServerCalls histogram `json:"serverCalls"`
	// Requests is what the API server served over the same window, by verb
	// and resource, watches included.
	Requests requestCounts `json:"requests,omitempty"`
	// StartCPU is the CPU each replacement used from its start until it
	// was seen Ready; ServersCPU is etcd's and kube-apiserver's over the
	// same window as Busy; Cores the machine's. Their sum over Cores is
	// the least wall time this run's measured work needed on this machine
	// (the old processes' drain not counted; spread differently, the
	// servers' part could differ).
	StartCPU   Dist          `json:"startCPU"`
	StartsCPU  time.Duration `json:"startsCPU"`
	ServersCPU time.Duration `json:"serversCPU"`
	Cores      int           `json:"cores"`
}

// CPUFloor is the least wall time this run's replacements' starts and
// servers' work needed on Cores: (StartsCPU + ServersCPU) / Cores.
func (s Stampede) CPUFloor() time.Duration {
	if s.Cores == 0 {
		return 0
	}
	return (s.StartsCPU + s.ServersCPU) / time.Duration(s.Cores)
}

// machineCPU is the busy and total CPU time of the machine so far, in
// clock ticks, from /proc/stat's first line.
func machineCPU() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// prober GETs a small object every proberInterval on a client of its
// own, recording each latency with its start.
type prober struct {
	mu      sync.Mutex
	samples []sample
	fails   int
}

type sample struct {
	at  time.Time
	lat time.Duration
}

func (p *prober) run(ctx context.Context, c client.Client) {
	t := time.NewTicker(proberInterval)
	defer t.Stop()
	for {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Get(rctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
		cancel()
		p.mu.Lock()
		if err != nil && ctx.Err() == nil {
			p.fails++
		} else if err == nil {
			p.samples = append(p.samples, sample{start, time.Since(start)})
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *prober) between(from, to time.Time) Dist {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	for _, s := range p.samples {
		if !s.at.Before(from) && s.at.Before(to) {
			ds = append(ds, s.lat)
		}
	}
	return summarize(ds)
}

// Stampede flips Common, which every adopter consumes, in
// spec.customNoUpgrade and then rewrites every entry in one status write
// (0.5-3 s later, seeded): every adopter restarts at that write. It
// measures from the status write.
func (f *Fleet) Stampede(ctx context.Context) (Stampede, error) {
	var st Stampede
	c, err := harness.NewClient(f.cp.Config, 5*time.Second)
	if err != nil {
		return st, fmt.Errorf("prober client: %w", err)
	}
	pctx, stopProber := context.WithCancel(ctx)
	defer stopProber()
	pr := &prober{}
	go pr.run(pctx, c)
	// Every adopter asked once a second from before the change until it
	// settled: a guard proves while asked, so lapses would show here.
	var askers sync.WaitGroup
	var askedMu sync.Mutex
	st.Asked = map[int]int{}
	for _, a := range f.Adopters {
		if url := a.DecideURL(); url != "" {
			askers.Go(func() {
				codes := askEach(pctx, url, stampedeAskInterval)
				askedMu.Lock()
				defer askedMu.Unlock()
				for code, n := range codes {
					st.Asked[code] += n
				}
			})
		}
	}
	defer func() {
		stopProber()
		askers.Wait()
	}()
	// A second of quiet first: the baseline latency.
	if err := harness.Wait(ctx, 2*time.Second); err != nil {
		return st, err
	}
	before := map[*Adopter]int{}
	for _, a := range f.Adopters {
		before[a] = a.Starts()
	}
	var write time.Time
	var readyAt, startCPU sync.Map
	etcd, apiserver, err := f.serverPIDs()
	if err != nil {
		return st, err
	}
	servers := []int{etcd, apiserver}
	st.Cores = runtime.NumCPU()
	ph, err := f.run(ctx, "stampede: "+f.Gates.Common+" (consumed by all) flipped", func(ctx context.Context, log func(string)) error {
		ce, cd, enabled := f.flipped(f.Gates.Common)
		if err := f.writeSpec(ctx, "CustomNoUpgrade", ce, cd); err != nil {
			return err
		}
		log("spec: flip " + f.Gates.Common)
		st.Baseline = pr.between(time.Time{}, time.Now())
		if err := harness.Wait(ctx, offsets(f.rng, []string{"all"})[0].after); err != nil {
			return err
		}
		lat0, latErr := scrapeAPIMetrics(ctx, f.cp.Config)
		servers0 := harness.CPUOf(servers)
		write = time.Now() // when the request is sent: the detections follow it
		busy0, total0, cpuErr := machineCPU()
		err := f.writeEntries(ctx, func(e map[string]Entry) {
			for v := range e {
				e[v] = Entry{Enabled: enabled.Clone()}
			}
		})
		if err != nil {
			return err
		}
		log("status: every entry rewritten")
		// Each adopter's replacement, polled for Ready as a kubelet's probe
		// would, every 100 ms (the p100's resolution).
		var wg sync.WaitGroup
		for _, a := range f.Adopters {
			wg.Go(func() {
				_ = poll(ctx, f.settleTimeout(), 100*time.Millisecond, func() (bool, string) {
					if a.Starts() > before[a] && a.Ready() {
						readyAt.Store(a, time.Now())
						if cpu, err := harness.ProcCPU(a.Current().Pid()); err == nil {
							startCPU.Store(a, cpu)
						}
						return true, ""
					}
					return false, ""
				})
			})
		}
		wg.Wait()
		if busy1, total1, err := machineCPU(); err == nil && cpuErr == nil && total1 > total0 {
			st.Busy = float64(busy1-busy0) / float64(total1-total0)
		}
		st.ServersCPU = harness.CPUOf(servers) - servers0
		if lat1, err := scrapeAPIMetrics(ctx, f.cp.Config); err == nil && latErr == nil {
			st.ServerSLI, st.ServerDuration = lat1.SLI.since(lat0.SLI), lat1.Duration.since(lat0.Duration)
			st.ServerCalls, st.Requests = lat1.All.since(lat0.All), lat1.Requests.since(lat0.Requests)
		}
		return nil
	})
	st.Phase = ph
	if err != nil {
		return st, err
	}
	var ready, detect, tail, start []time.Duration
	var slowest time.Duration
	for _, a := range f.Adopters {
		r, ok := readyAt.Load(a)
		if !ok {
			return st, fmt.Errorf("%s: no replacement Ready", a.Spec.Name)
		}
		ready = append(ready, r.(time.Time).Sub(write))
		st.AllReady = max(st.AllReady, r.(time.Time).Sub(write))
		for _, e := range a.Exits() {
			if !e.Restart() || e.At.Before(write.Add(-5*time.Second)) {
				continue
			}
			start = append(start, r.(time.Time).Sub(e.At))
			if a.libraryGo {
				continue
			}
			lines := e.Process.Log.Lines()
			i := indexOf(lines, detected)
			if i < 0 {
				return st, fmt.Errorf("%s pid %d exited 0 with no detection line", a.Spec.Name, e.Process.Pid())
			}
			d := lines[i].At()
			detect = append(detect, d.Sub(write))
			tail = append(tail, e.At.Sub(d))
			if t := e.At.Sub(d); t >= slowest {
				slowest, st.SlowTailName, st.SlowTail = t, fmt.Sprintf("%s (pid %d)", a.Spec.Name, e.Process.Pid()), raw(lines[i:])
			}
		}
		for _, p := range a.Processes() {
			if !p.Started().After(write) {
				continue
			}
			for _, l := range p.Log.Lines() {
				if lapsed.Matches(l) {
					st.Lapses++
					if len(st.LapseLines) < maxLapseLines {
						st.LapseLines = append(st.LapseLines, a.Spec.Name+": "+l.Raw)
					}
				}
			}
		}
	}
	var cpus []time.Duration
	startCPU.Range(func(_, v any) bool {
		cpus = append(cpus, v.(time.Duration))
		st.StartsCPU += v.(time.Duration)
		return true
	})
	st.StartCPU = summarize(cpus)
	st.Ready, st.Detect, st.Tail, st.Start = summarize(ready), summarize(detect), summarize(tail), summarize(start)
	st.ReadyTimes = ready
	st.API = pr.between(write, write.Add(st.AllReady))
	pr.mu.Lock()
	st.APIFails = pr.fails
	pr.mu.Unlock()
	return st, nil
}

func indexOf(lines []harness.Line, m harness.Match) int {
	for i, l := range lines {
		if m.Matches(l) {
			return i
		}
	}
	return -1
}

func raw(lines []harness.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Raw
	}
	return out
}
