package main

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// idleSettle is how long an operator idles after its first run before its
// memory is read: the run's garbage is collected and handed back by then.
const idleSettle = 10 * time.Second

// bareRuns is how many operators without manifests are measured, one after
// the other: a single process's anonymous memory varies by half a MiB from
// one start to the next (when the garbage collector last ran).
const bareRuns = 5

// footprint starts an operator with the default resync period against a
// control plane that holds the applied payload, lets it apply (no-op) and
// settle, and reads memory, goroutines and idle CPU.
func (b *bench) footprint(ctx context.Context, pl *plane, payload string, noopCPU []time.Duration) ([][2]string, []check, error) {
	ctx, cancel := context.WithTimeout(ctx, b.idle+3*time.Minute)
	defer cancel()
	port, err := harness.FreePort()
	if err != nil {
		return nil, nil, err
	}
	p, err := b.operator(pl, "footprint", "--manifests-dir="+payload,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false")
	if err != nil {
		return nil, nil, err
	}
	defer p.Stop(10 * time.Second)
	a, i, err := nextRun(ctx, p, 0)
	if err != nil {
		return nil, nil, err
	}
	pid := p.Pid()
	cpuAfterApply, err := harness.ProcCPU(pid)
	if err != nil {
		return nil, nil, err
	}
	if err := harness.Wait(ctx, idleSettle); err != nil {
		return nil, nil, err
	}
	m, err := harness.ProcStatus(pid)
	if err != nil {
		return nil, nil, err
	}
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	goroutines, gerr := scrapeMetric(metrics, "go_goroutines")
	heap, _ := scrapeMetric(metrics, "go_memstats_heap_inuse_bytes")
	cpu0, err := harness.ProcCPU(pid)
	if err != nil {
		return nil, nil, err
	}
	w0 := time.Now()
	if err := harness.Wait(ctx, b.idle); err != nil {
		return nil, nil, err
	}
	cpu1, err := harness.ProcCPU(pid)
	if err != nil {
		return nil, nil, err
	}
	window := time.Since(w0)
	m2, _ := harness.ProcStatus(pid)
	if _, _, ok := p.Log.FindFrom(i+1, harness.Contains(`"Manifests applied"`)); ok {
		return nil, nil, fmt.Errorf("footprint: a resync ran during the idle window; see %s", p.LogPath())
	}
	perHour := time.Duration(float64(cpu1-cpu0) * float64(time.Hour) / float64(window))
	g := "n/a (" + fmt.Sprint(gerr) + ")"
	if gerr == nil {
		g = strconv.FormatFloat(goroutines, 'f', 0, 64)
	}
	rss := max(m.RSS, m2.RSS)
	rows := [][2]string{
		{"footprint: state", fmt.Sprintf("idle operator, %s after its first run applied %d manifests (a no-op run of %s, cumulative CPU then %s); "+
			"one FeatureGate watched, no leader election, default resync 3m", fmtDur(idleSettle), a.applied, fmtDur(a.duration), cpuAfterApply.Round(10*time.Millisecond))},
		{"footprint: RSS (VmRSS)", fmt.Sprintf("%s at the start of the idle window, %s at its end; of it %s anonymous (heap, stacks) and %s file-backed (the %s binary's pages)",
			mib(m.RSS), mib(m2.RSS), mib(m.Anon), mib(m.File), binarySize(b.manager))},
		{"footprint: peak RSS (VmHWM)", mib(m.HWM)},
		{"footprint: Go heap in use", fmt.Sprintf("%.1f MiB (go_memstats_heap_inuse_bytes)", heap/(1<<20))},
		{"footprint: goroutines (go_goroutines)", g},
		{"footprint: OS threads", strconv.FormatInt(m.Threads, 10)},
		{"footprint: idle CPU", fmt.Sprintf("%s over %s = %.1f CPU-seconds per hour (utime+stime; resolution 10 ms)", (cpu1 - cpu0).Round(time.Millisecond), window.Round(time.Second), perHour.Seconds())},
	}
	if len(noopCPU) > 0 {
		reapply := summarize(noopCPU).P50
		resyncs := float64(time.Hour / (3 * time.Minute))
		rows = append(rows, [2]string{"footprint: CPU with resyncs", fmt.Sprintf(
			"a no-op re-apply costs %s CPU (median of %d, measured between the first and second run with --resync-period=3s); "+
				"with the default 3m resync that is %.0f re-applies per hour: %.1f CPU-seconds per hour in all",
			reapply.Round(10*time.Millisecond), len(noopCPU), resyncs, perHour.Seconds()+resyncs*reapply.Seconds())})
	}
	checks := []check{{"RSS ≤ 40 MiB (idle, 800-manifest payload applied)", mib(rss), rss <= 40*1024}}
	p.Stop(10 * time.Second)

	bare, bareChecks, err := b.bareFootprint(ctx, pl)
	return append(rows, bare...), append(checks, bareChecks...), err
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func binarySize(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.0f MiB", float64(info.Size())/(1<<20))
}

// metricsClient scrapes a process that may be gone the next run, its port
// someone else's: no kept-alive connections.
var metricsClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrapeMetric reads one unlabelled sample from a Prometheus text endpoint.
func scrapeMetric(url, name string) (float64, error) {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}

// idleMemory is one operator's memory idleSettle after its first run: its
// status, and the resident part of each mapping of its binary.
type idleMemory struct {
	harness.MemStatus
	code, rodata int64 // KiB resident: text; read-only data with the pclntab
}

// idleOperator starts bin without manifests against pl, waits for its first
// run and idleSettle more, and reads its memory.
func (b *bench) idleOperator(ctx context.Context, pl *plane, name, bin string) (idleMemory, error) {
	var m idleMemory
	p, err := b.operatorFrom(bin, pl, name)
	if err != nil {
		return m, err
	}
	defer p.Stop(10 * time.Second)
	if _, _, err := p.WaitLine(ctx, 0, harness.Contains(`"Manifests applied"`)); err != nil {
		return m, err
	}
	if err := harness.Wait(ctx, idleSettle); err != nil {
		return m, err
	}
	if m.MemStatus, err = harness.ProcStatus(p.Pid()); err != nil {
		return m, err
	}
	m.code, m.rodata, err = residentOf(p.Pid(), bin)
	return m, err
}

// bareFootprint measures the operator without manifests bareRuns times and,
// for comparison, once as the linker wrote it (see bench.linked).
func (b *bench) bareFootprint(ctx context.Context, pl *plane) ([][2]string, []check, error) {
	var runs []idleMemory
	for i := range bareRuns {
		m, err := b.idleOperator(ctx, pl, fmt.Sprintf("footprint-bare-%d", i), b.manager)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, m)
	}
	slices.SortFunc(runs, func(x, y idleMemory) int { return int(x.RSS - y.RSS) })
	med := runs[len(runs)/2]
	rows := [][2]string{
		{"footprint: baseline without --manifests-dir", fmt.Sprintf("RSS %s (median of %d operators, %s after their first run; min %s, max %s): "+
			"%s anonymous (heap, stacks), %s file-backed (%s of the binary's code, %s of its read-only data and pclntab), peak %s, %d threads",
			mib(med.RSS), len(runs), fmtDur(idleSettle), mib(runs[0].RSS), mib(runs[len(runs)-1].RSS),
			mib(med.Anon), mib(med.File), mib(med.code), mib(med.rodata), mib(med.HWM), med.Threads)},
	}
	linked, err := b.idleOperator(ctx, pl, "footprint-bare-linked", b.linked)
	if err != nil {
		return nil, nil, err
	}
	rows = append(rows, [2]string{"footprint: baseline run from the linker's output", fmt.Sprintf(
		"RSS %s (%s file-backed), one operator; the file the Go linker wrote through mmap, not a copy of it (see the method)", mib(linked.RSS), mib(linked.File))})
	rows = append(rows, [2]string{"footprint: binary", binaryLayout(b.manager)})
	if allocs, err := initAllocs(ctx, b.manager); err == nil {
		rows = append(rows, [2]string{"footprint: package initialisation", allocs})
	} else {
		rows = append(rows, [2]string{"footprint: package initialisation", "not measured: " + err.Error()})
	}
	checks := []check{{"RSS ≤ 32 MiB (idle, no manifests, 10 s after start)",
		fmt.Sprintf("%s (median of %d; max %s)", mib(med.RSS), len(runs), mib(runs[len(runs)-1].RSS)), med.RSS <= 32*1024}}
	return rows, checks, nil
}

// residentOf sums the resident KiB of pid's mappings of the file bin: its
// code (r-xp) and its read-only data (r--p).
func residentOf(pid int, bin string) (code, rodata int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return residentIn(f, bin)
}

// residentIn is residentOf reading an smaps file.
func residentIn(smaps io.Reader, bin string) (code, rodata int64, err error) {
	var cur *int64
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			cur = nil
			if len(fields) >= 6 && fields[5] == bin {
				switch fields[1] {
				case "r-xp":
					cur = &code
				case "r--p":
					cur = &rodata
				}
			}
		case cur != nil && len(fields) >= 2 && fields[0] == "Rss:":
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			*cur += n
		}
	}
	return code, rodata, sc.Err()
}

// binaryLayout describes the file at path: its size and the sections its
// pages are mapped from.
func binaryLayout(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	desc := fmt.Sprintf("%.1f MiB", float64(info.Size())/(1<<20))
	f, err := elf.Open(path)
	if err != nil {
		return desc
	}
	defer f.Close()
	var parts []string
	for _, name := range []string{".text", ".rodata", ".gopclntab"} {
		if s := f.Section(name); s != nil {
			parts = append(parts, fmt.Sprintf("%s %.1f MiB", name, float64(s.Size)/(1<<20)))
		}
	}
	stripped := "symbols and DWARF stripped (`-ldflags=-s -w`, as the Dockerfile builds it)"
	if f.Section(".symtab") != nil {
		stripped = "with symbols"
	}
	return desc + ", " + stripped + ": " + strings.Join(parts, ", ")
}

// initAllocs runs bin with GODEBUG=inittrace=1 and sums what the packages'
// init functions allocate, naming the largest.
func initAllocs(ctx context.Context, bin string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, _ := cmd.CombinedOutput() // --help exits 2
	pkgs, total := parseInitTrace(string(out))
	if len(pkgs) == 0 {
		return "", fmt.Errorf("no inittrace lines from %s --help", bin)
	}
	var top []string
	for _, p := range pkgs[:min(4, len(pkgs))] {
		top = append(top, fmt.Sprintf("`%s` %.0f KiB", p.name, float64(p.bytes)/1024))
	}
	return fmt.Sprintf("%d packages' init functions allocate %.1f MiB (GODEBUG=inittrace=1); the largest: %s",
		len(pkgs), float64(total)/(1<<20), strings.Join(top, ", ")), nil
}

// initAlloc is what one package's init functions allocated.
type initAlloc struct {
	name  string
	bytes int64
}

// parseInitTrace reads the runtime's inittrace lines, largest first, and
// their sum in bytes.
func parseInitTrace(out string) ([]initAlloc, int64) {
	var pkgs []initAlloc
	var total int64
	for _, line := range strings.Split(out, "\n") {
		// init k8s.io/api/core/v1 @12 ms, 0.21 ms clock, 67272 bytes, 512 allocs
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil {
			continue
		}
		pkgs = append(pkgs, initAlloc{f[1], n})
		total += n
	}
	slices.SortStableFunc(pkgs, func(x, y initAlloc) int { return int(y.bytes - x.bytes) })
	return pkgs, total
}

// install copies bin to dst with write(2), as an image layer's files are
// unpacked onto a node.
func install(bin, dst string) error {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	// A bare Reader: no copy_file_range, plain writes.
	if _, err := io.Copy(out, struct{ io.Reader }{src}); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
