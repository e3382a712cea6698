package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/featuregate-operator/operator/test/framework/mdsection"
)

// replicas is the fleet size the idle cost is extrapolated to: about the
// operator replicas of a cluster that adopted the guard everywhere.
const replicas = 180

// Report is what `make fleet` writes, as Markdown and as JSON.
type Report struct {
	Seed     uint64        `json:"seed"`
	N        int           `json:"n"`
	Settle   time.Duration `json:"settle"`
	Adopters []Spec        `json:"adopters"`
	Phases   []Phase       `json:"phases"`
	Stampede Stampede      `json:"stampede"`
	// LibraryGoStampede is the same stampede with library-go's
	// FeatureGateAccess in every adopter's place.
	LibraryGoStampede Stampede `json:"libraryGoStampede"`
	// BareStampede is the same stampede with test/fleet/cmd/bare, the
	// guard with nothing else to do, in every adopter's place.
	BareStampede Stampede `json:"bareStampede"`
	Costs        []Cost   `json:"costs"`
	// ReadCosts is what each kind of read a proof could be made of costs
	// the servers, measured with no adopter running.
	ReadCosts []ReadCost `json:"readCosts,omitempty"`
	Failures  []string   `json:"failures,omitempty"`
	Measured  time.Time  `json:"measured"`
}

// readyChart draws, for each half second since the write, how many of n
// adopters were Ready again by then: the stampede's recovery at a glance.
func readyChart(ready []time.Duration, n int) string {
	if len(ready) == 0 || n == 0 {
		return ""
	}
	const step, width = 500 * time.Millisecond, 40
	var b strings.Builder
	for t := step; ; t += step {
		k := 0
		for _, r := range ready {
			if r <= t {
				k++
			}
		}
		fmt.Fprintf(&b, "%5.1fs |%-*s| %d/%d\n", t.Seconds(), width, strings.Repeat("#", k*width/n), k, n)
		if k == len(ready) {
			return b.String()
		}
	}
}

// Splice puts the Markdown as the Fleet section of the report at path
// (BENCHMARKS.md), keeping every other section.
func (r Report) Splice(path string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s to splice the Fleet section: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(mdsection.Put(string(old), "Fleet", r.Markdown())), 0o644); err != nil {
		return fmt.Errorf("splice the Fleet section into %s: %w", path, err)
	}
	return nil
}

// Write writes the Markdown to path and the JSON beside it (.json).
func (r Report) Write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(path, ".md")+".json", data, 0o644); err != nil {
		return fmt.Errorf("write fleet JSON: %w", err)
	}
	if err := os.WriteFile(path, []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("write fleet report: %w", err)
	}
	return nil
}

// Markdown is the "Fleet" section of BENCHMARKS.md.
func (r Report) Markdown() string {
	var b strings.Builder
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	fmt.Fprintf(&b, "## Fleet\n\n")
	fmt.Fprintf(&b, "%d adopters (examples/consumer, each under a kubelet-like loop that starts a process again the moment it exits) on one etcd + kube-apiserver, 2 CPUs; seed %d (`make fleet FLEET_N=%d FLEET_SEED=%d` repeats it); measured %s.\n",
		r.N, r.Seed, r.N, r.Seed, r.Measured.UTC().Format("2006-01-02 15:04 MST"))
	versions := map[string]int{}
	all, fs := 0, 0
	for _, s := range r.Adopters {
		versions[s.Version]++
		if len(s.Watched) == 0 {
			all++
		}
		if s.WatchFeatureSet {
			fs++
		}
	}
	fmt.Fprintf(&b, "Versions %v; %d adopters consume every gate, the others 1-3 of the 40 gates; %d watch the feature set.\n\n", versions, all, fs)
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, "**Failures:** %s\n\n", strings.Join(r.Failures, "; "))
	}

	b.WriteString("### Restarts per change, guard vs library-go's rule\n\n")
	fmt.Fprintf(&b, "**A model, not a cluster, for the adopters not on %s.** The harness rewrites every version's status entry from the new spec, one status write per version, each 0.5-3 s after the spec write (seeded). "+
		"A cluster's cluster-config-operator computes only its own release version's entry and writes it in one status write that keeps the other versions' entries as they were and drops those of versions not in the ClusterVersion's history "+
		"(openshift/cluster-config-operator@a02c879 `pkg/operator/featuregates/featuregate_controller.go:89-128`). "+
		"So on a cluster whose cluster-config-operator runs %s, its %d adopters here restart as counted, while an adopter of another version finds its entry unchanged: "+
		"no restart for a gate consumer, under the guard or library-go's rule, and, on a feature-set switch, one exit for a feature-set consumer once its wait for the rewrite (10 s) runs out. "+
		"The upgrade's entries are modelled too: a cluster drops an entry only once its version has left the ClusterVersion's history.\n\n",
		versionCurrent, versionCurrent, versions[versionCurrent])
	b.WriteString("library-go's FeatureGateAccess restarts once per status write that changes its version's enabled or disabled list, whatever spec.featureSet says. Settled: all Ready and no start or exit for " + ms(r.Settle) + ".\n\n")
	b.WriteString("Restarts in the model:\n\n")
	b.WriteString(restartTable(r.Phases))
	b.WriteString("\n| change | writes | settled after |\n|---|---|---:|\n")
	for _, ph := range r.Phases {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", ph.Name, strings.Join(ph.Writes, "; "), ms(ph.Settled))
	}

	s := r.Stampede
	b.WriteString("\n### Stampede: a gate every adopter consumes flipped\n\n")
	b.WriteString("spec.customNoUpgrade write, then one status write rewriting every entry (the model's write, as above: on a cluster only the adopters of cluster-config-operator's version would restart); times from that status write. Ready polled every 100 ms per adopter; API latency by a GET of a Namespace every 50 ms on a client of its own.\n\n")
	l, g := r.LibraryGoStampede, r.BareStampede
	b.WriteString("Three fleets, one after the other, on the same versions and gates: examples/consumer (an operator: the guard, a ConfigMap controller, `/decide` asked once a second each); test/fleet/cmd/bare (the guard and nothing else, written from docs/adopting.md); test/librarygo/cmd/idle (library-go's FeatureGateAccess and nothing else, recording its Events as core Events through library-go's plain recorder, `events.NewRecorder`, one create each, where an operator's `events.NewKubeRecorder` sends them through client-go's broadcaster; it exits 0 at once, logging no detection line).\n\n")
	fmt.Fprintf(&b, "| measure | examples/consumer | bare guard | library-go |\n|---|---|---|---|\n")
	row := func(name string, f func(Stampede) string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, f(s), f(g), f(l))
	}
	row("restarts (measured / library-go's rule)", func(x Stampede) string { return fmt.Sprintf("%d / %d", x.Phase.Guard, x.Phase.LibraryGo) })
	row("write → every adopter Ready again (p100)", func(x Stampede) string { return ms(x.AllReady) })
	row("write → adopter Ready again", func(x Stampede) string { return x.Ready.String() })
	row("write → detection line", func(x Stampede) string { return x.Detect.String() })
	row("exit tail: detection line → process exit", func(x Stampede) string { return x.Tail.String() })
	row("exit → replacement Ready", func(x Stampede) string { return x.Start.String() })
	row("API GET latency during the stampede", func(x Stampede) string { return x.API.String() })
	row("API GET latency before it", func(x Stampede) string { return x.Baseline.String() })
	row("API GETs failed", func(x Stampede) string { return fmt.Sprint(x.APIFails) })
	row("/decide answers during it (asked once a second each)", func(x Stampede) string {
		if len(x.Asked) == 0 {
			return "-"
		}
		return fmt.Sprintf("200: %d, 503: %d, no answer: %d", x.Asked[200], x.Asked[503], x.Asked[0])
	})
	row("freshness lapses logged by the replacements, asked throughout (target 0)", func(x Stampede) string {
		if len(x.Asked) == 0 {
			return "- (not asked: proves nothing)"
		}
		return fmt.Sprint(x.Lapses)
	})
	row(fmt.Sprintf("CPU busy during it (all processes, of %d cores)", runtime.NumCPU()), func(x Stampede) string { return fmt.Sprintf("%.0f%%", x.Busy*100) })
	row("API server's own latency of single-object calls during it (SLI, `"+sliMetric+"`, bucket bounds)", func(x Stampede) string { return x.ServerSLI.String() })
	row("the same, whole request time (`"+durationMetric+"`)", func(x Stampede) string { return x.ServerDuration.String() })
	row("every call but watches, any scope (creates, such as the Events' POSTs, included), whole request time", func(x Stampede) string { return x.ServerCalls.String() })
	row("requests the API server served during it, by verb and resource (watches included)", func(x Stampede) string { return x.Requests.String() })
	row("CPU of each replacement from its start until Ready", func(x Stampede) string { return x.StartCPU.String() })
	row("this run's measured CPU over the cores, the least wall time it needed: (replacements' CPU + etcd and kube-apiserver CPU) / cores", func(x Stampede) string {
		if x.Cores == 0 {
			return "-"
		}
		return fmt.Sprintf("%s = (%s + %s) / %d", ms(x.CPUFloor()), ms(x.StartsCPU), ms(x.ServersCPU), x.Cores)
	})
	if c := readyChart(s.ReadyTimes, r.N); c != "" {
		fmt.Fprintf(&b, "\nexamples/consumer adopters Ready again, by time since the write:\n\n```text\n%s```\n", c)
	}
	if c := readyChart(g.ReadyTimes, r.N); c != "" {
		fmt.Fprintf(&b, "\nBare guard adopters Ready again, by time since the write:\n\n```text\n%s```\n", c)
	}
	if c := readyChart(l.ReadyTimes, r.N); c != "" {
		fmt.Fprintf(&b, "\nlibrary-go adopters Ready again, by time since the write:\n\n```text\n%s```\n", c)
	}
	if len(s.LapseLines) > 0 {
		fmt.Fprintf(&b, "\nThe replacements' lapses (first %d):\n\n```text\n%s\n```\n", len(s.LapseLines), strings.Join(s.LapseLines, "\n"))
	}
	fmt.Fprintf(&b, "\nThe slowest exit tail, %s, from its detection line to its exit:\n\n```text\n%s\n```\n", s.SlowTailName, strings.Join(s.SlowTail, "\n"))

	b.WriteString("\n### Idle and busy cost on the API server, guard vs library-go\n\n")
	b.WriteString("etcd + kube-apiserver CPU from /proc over the window (the harness's own requests are not in it), after a 10 s warm-up; per adopter-hour above the baseline, and extrapolated to 180 replicas. RSS is the adopters' mean.\n\n")
	b.WriteString("| phase | adopters | window | etcd + apiserver CPU (etcd's part) | s per adopter-hour | cores at 180 replicas | adopter CPU, s per hour each | adopter RSS | etcd / kube-apiserver RSS |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var base Cost
	for _, c := range r.Costs {
		if c.N == 0 {
			base = c
		}
	}
	for _, c := range r.Costs {
		per, cores, self, rss := "-", "-", "-", "-"
		if c.N > 0 {
			per = fmt.Sprintf("%.1f", c.perProcessHour(base))
			cores = fmt.Sprintf("%.3f", c.cores(base, replicas))
			self = fmt.Sprintf("%.1f", c.AdopterCPU.Seconds()/float64(c.N)/c.Window.Hours())
			rss = fmt.Sprintf("%.1f MiB", float64(c.RSSKiB)/1024)
		}
		servers := "-"
		if c.EtcdRSSKiB > 0 || c.APIServerRSSKiB > 0 {
			servers = fmt.Sprintf("%.0f / %.0f MiB", float64(c.EtcdRSSKiB)/1024, float64(c.APIServerRSSKiB)/1024)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s (%s) | %s | %s | %s | %s | %s |\n", c.Name, c.N, c.Window, ms(c.ServerCPU), ms(c.EtcdCPU), per, cores, self, rss, servers)
		if c.Decide200+c.Decide503+c.DecideErr > 0 {
			fmt.Fprintf(&b, "| ↳ /decide answers | | | 200: %d | 503: %d | failed: %d | | | |\n", c.Decide200, c.Decide503, c.DecideErr)
		}
	}
	b.WriteString(proofCost(r.Costs))
	if len(r.ReadCosts) > 0 {
		b.WriteString("\n### What one read costs: the floor of any proof made of reads\n\n")
		b.WriteString("Each kind of read sent one after another on one kept-alive connection, with no adopter running, interleaved in rounds; each server's CPU from /proc, its idle rate over the same time taken off. 0.1 of a core over 180 replicas reading once a second (the default bound's pace) leaves 0.56 ms of both servers' CPU per read.\n\n")
		b.WriteString(readCostTable(r.ReadCosts))
	}
	return b.String()
}

// defaultPeriod is the guard's read period at the default freshness bound
// (2 s): one consistent read a second while asked.
const defaultPeriod = time.Second

// proofCost says what the busy fleet's proof costs per read, and the bound
// at which 180 replicas that all ask would cost a tenth of a core.
func proofCost(costs []Cost) string {
	var idle, busy *Cost
	for i := range costs {
		switch c := &costs[i]; c.Name {
		case nameIdleGuard:
			idle = c
		case nameBusyGuard:
			busy = c
		}
	}
	if idle == nil || busy == nil || busy.N == 0 || busy.Window <= 0 {
		return ""
	}
	reads := float64(busy.N) * busy.Window.Seconds() / defaultPeriod.Seconds()
	perRead := (busy.ServerCPU - idle.ServerCPU).Seconds() / reads
	if perRead <= 0 {
		return ""
	}
	// 0.1 core over 180 replicas allows this many reads a second each.
	allowed := 0.1 / (replicas * perRead)
	return fmt.Sprintf("\nThe busy fleet's extra cost is its proof: %.0f consistent reads of the FeatureGate in the window (one a second per adopter at the default bound), %.2f ms of etcd + kube-apiserver CPU each. "+
		"180 replicas that all ask would cost %.2f of a core; a tenth of a core allows %.2f reads a second each, a freshness bound of %.1f s, "+
		"or, at the default bound, %d replicas asking (the leaders of %d HA operators; a standby asks nothing, so proves nothing).\n",
		reads, perRead*1000, replicas*perRead/defaultPeriod.Seconds(), allowed, 2/allowed, int(0.1/perRead), int(0.1/perRead))
}
