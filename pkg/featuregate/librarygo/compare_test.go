package librarygo_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

var (
	compareRuns   = flag.Int("compare.runs", 10, "runs of each timed measurement, per access")
	compareFleet  = flag.Int("compare.fleet", 10, "processes per access for the API cost")
	compareWindow = flag.Duration("compare.window", time.Minute, "how long the API cost is counted")
	compareReport = flag.String("compare.report", "", "file the Markdown section is written to (besides the test log)")
	compareKeep   = flag.Bool("compare.keep", false, "keep the processes' logs (their directory is logged)")
)

// compareSection is the section of BENCHMARKS.md the report is, kept there
// by make bench.
const compareSection = "library-go's FeatureGateAccess beside librarygo.Access"

// The two accesses compared, as test/librarygo/cmd/idle's -access names them.
var accesses = []struct{ flag, title string }{
	{"librarygo", "library-go `featuregates.NewFeatureGateAccess`"},
	{"guard", "`librarygo.NewFeatureGateAccess`"},
}

// TestCompareWithLibraryGo measures library-go's FeatureGateAccess and
// librarygo.Access side by side, the same program (test/librarygo/cmd/idle)
// built once and run with each, on one control plane: ready after the API
// returns, a change during an outage, restarts per change, and the API
// requests per second of an idle and a busy fleet. A measurement, not a
// test: it runs only with FEATUREGATE_COMPARE=1 (make bench-librarygo) and
// fails only when it cannot measure.
func TestCompareWithLibraryGo(t *testing.T) {
	if os.Getenv("FEATUREGATE_COMPARE") != "1" {
		t.Skip("a measurement: FEATUREGATE_COMPARE=1 (make bench-librarygo)")
	}
	bin := filepath.Join(t.TempDir(), "idle")
	build := exec.Command("go", "build", "-o", bin, "./cmd/idle")
	build.Dir = filepath.Join("..", "..", "..", "test", "librarygo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the idle program: %v\n%s", err, out)
	}
	cp := testenv.StartT(t, nil)
	admin := testenv.Client(t, cp.Config)
	const version = "4.22.0"
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Status: gateEntries{version: {{"GateA"}, {"GateB"}}}.status()}
	testenv.CreateFeatureGate(t, admin, fg)
	dir := t.TempDir()
	if *compareKeep {
		var err error
		if dir, err = os.MkdirTemp("", "librarygo-compare-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("the processes' logs are kept in %s", dir)
	}
	w := &world{t: t, cp: cp, admin: admin, bin: bin, version: version, dir: dir}
	w.proxy = startCutProxy(t, hostOf(cp.Config))
	w.direct = w.kubeconfig("direct", cp.Config.Host)
	w.viaProxy = w.kubeconfig("proxy", "https://"+w.proxy.addr())
	if cfg, err := clientcmd.BuildConfigFromFlags("", w.viaProxy); err != nil {
		t.Fatal(err)
	} else if _, err := client.New(cfg, client.Options{Scheme: admin.Scheme()}); err != nil {
		t.Fatalf("through the proxy: %v", err)
	} else if err := testenv.Client(t, cfg).Get(t.Context(), client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{}); err != nil {
		t.Fatalf("a read through the proxy: %v", err)
	}

	var b strings.Builder
	b.WriteString("## " + compareSection + "\n\n")
	fmt.Fprintf(&b, "Written by `make bench-librarygo` (%s, %s): one program, test/librarygo/cmd/idle, built once and run with `-access=librarygo` "+
		"(library-go's `FeatureGateAccess` on config informers, its ForceExit handler) and `-access=guard` (`librarygo.Access` from the same arguments), "+
		"one process at a time unless a fleet, on one etcd and kube-apiserver with a FeatureGate entry of two gates for the process's version. "+
		"Ready: `/readyz` 200 once `InitialFeatureGatesObserved` closed. API available: the harness's first answered GET of the FeatureGate, tried every 10 ms while the API server restarts after 1 s down. "+
		"The link cut: the process's own TCP proxy closes every connection and refuses new ones while the gate is flipped through the admin's link. "+
		"Exits: one process, the change made, an exit within 15 s or none. Requests: `apiserver_request_total` on featuregates, clusterversions and events, over the window after the fleet is ready and 5 s more "+
		"(a watch is counted when it ends, so an idle fleet counts almost nothing).\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOARCH)
	b.WriteString("| measure | " + accesses[0].title + " | " + accesses[1].title + " |\n| --- | --- | --- |\n")
	row := func(name string, cell func(access string) string) {
		b.WriteString("| " + name + " |")
		for _, a := range accesses {
			b.WriteString(" " + cell(a.flag) + " |")
		}
		b.WriteString("\n")
	}
	row(fmt.Sprintf("API available → ready (n=%d)", *compareRuns), func(a string) string { return quantiles(w.readyAfterAPI(a, *compareRuns)) })
	row(fmt.Sprintf("gate changed while the link was cut for 2 s: link back → exit (n=%d)", *compareRuns), func(a string) string { return quantiles(w.changeDuringOutage(a, *compareRuns)) })
	row("exits: the feature set switched (spec), its entry rewritten 1 s later", func(a string) string { return w.exits(a, switchFeatureSet) })
	row("exits: the entry's enabled list reordered, nothing else", func(a string) string { return w.exits(a, reorderEntry) })
	row("exits: another version's entry rewritten", func(a string) string { return w.exits(a, otherVersion) })
	row(fmt.Sprintf("API requests/s, %d idle processes, %s", *compareFleet, *compareWindow), func(a string) string { return w.cost(a, 0) })
	row(fmt.Sprintf("API requests/s, %d processes asking Current every 100 ms", *compareFleet), func(a string) string {
		if a == "librarygo" {
			return "(no Current: as idle)"
		}
		return w.cost(a, 100*time.Millisecond)
	})
	t.Log("\n" + b.String())
	if *compareReport != "" {
		if err := os.WriteFile(*compareReport, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type world struct {
	t                 *testing.T
	cp                *testenv.ControlPlane
	admin             client.Client
	bin, version, dir string
	direct, viaProxy  string
	proxy             *cutProxy
	procs, others     int
}

func hostOf(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return strings.TrimPrefix(cfg.Host, "https://")
	}
	return u.Host
}

// kubeconfig writes the admin config with server as its address.
func (w *world) kubeconfig(name, server string) string {
	w.t.Helper()
	c := w.cp.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.CAData, TLSServerName: "localhost"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(w.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// proc is one run of the idle program.
type proc struct {
	log   string
	cmd   *exec.Cmd
	probe string
	done  chan struct{}
	exit  time.Time
	code  int
}

func (w *world) start(access, kubeconfig string, extra ...string) *proc {
	w.t.Helper()
	w.procs++
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	probe := l.Addr().String()
	_ = l.Close()
	args := append([]string{"--kubeconfig=" + kubeconfig, "--release-version=" + w.version, "--access=" + access,
		"--health-probe-bind-address=" + probe, "--initial-timeout=10m", "--events-namespace="}, extra...)
	cmd := exec.Command(w.bin, args...)
	logPath := filepath.Join(w.dir, fmt.Sprintf("%s-%03d.log", access, w.procs))
	log, err := os.Create(logPath)
	if err != nil {
		w.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	p := &proc{cmd: cmd, probe: probe, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		p.exit, p.code = time.Now(), cmd.ProcessState.ExitCode()
		_ = log.Close()
		close(p.done)
	}()
	w.t.Cleanup(p.stop)
	return p
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var probeClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (p *proc) ready() bool {
	resp, err := probeClient.Get("http://" + p.probe + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// until polls cond every 5 ms for up to limit and returns when it held.
func until(limit time.Duration, cond func() bool) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not within %s", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tail is the end of the process's log, for a failure's message.
func (p *proc) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

func (p *proc) waitReady(limit time.Duration) (time.Time, error) {
	t, err := until(limit, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		return p.ready()
	})
	if err != nil {
		return t, fmt.Errorf("%w; its log ends:\n%s", err, p.tail())
	}
	return t, nil
}

// readyAfterAPI: the API server stopped, the process started, 1 s of
// refused reads, the API server started again; from the harness's first
// read that it answers to the process's first /readyz 200.
func (w *world) readyAfterAPI(access string, runs int) []time.Duration {
	var out []time.Duration
	for range runs {
		if err := w.cp.StopAPIServer(); err != nil {
			w.t.Fatal(err)
		}
		p := w.start(access, w.direct)
		time.Sleep(time.Second) // the outage the process starts into
		started := make(chan error, 1)
		go func() { started <- w.cp.StartAPIServer() }()
		apiAt, err := until(time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			return w.admin.Get(ctx, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{}) == nil
		})
		if err != nil {
			w.t.Fatalf("API server not back: %v", err)
		}
		if err := <-started; err != nil {
			w.t.Fatal(err)
		}
		readyAt, err := p.waitReady(2 * time.Minute)
		if err != nil {
			w.t.Fatalf("%s: not ready after the API returned: %v", access, err)
		}
		out = append(out, readyAt.Sub(apiAt))
		p.stop()
	}
	return out
}

// changeDuringOutage: a ready process whose link is cut; the gate flipped
// through the admin's own link; 2 s later the link is back: from then to
// the process's exit.
func (w *world) changeDuringOutage(access string, runs int) []time.Duration {
	var out []time.Duration
	for range runs {
		p := w.start(access, w.viaProxy)
		if _, err := p.waitReady(time.Minute); err != nil {
			w.t.Fatalf("%s: not ready: %v", access, err)
		}
		w.proxy.cut()
		w.setEntry(func(d *configv1.FeatureGateDetails) { d.Enabled, d.Disabled = d.Disabled, d.Enabled })
		time.Sleep(2 * time.Second)
		select {
		case <-p.done:
			w.t.Fatalf("%s exited during the cut, code %d", access, p.code)
		default:
		}
		back := time.Now()
		w.proxy.restore()
		select {
		case <-p.done:
			out = append(out, p.exit.Sub(back))
		case <-time.After(2 * time.Minute):
			w.t.Fatalf("%s: no exit within 2 min of the link's return", access)
		}
	}
	return out
}

// A change made to the FeatureGate by exits.
type change func(w *world)

func switchFeatureSet(w *world) {
	fg := w.get()
	// The API refuses a way back to Default and any way out of the
	// NoUpgrade sets: Default to OKD for the first access, OKD to
	// TechPreviewNoUpgrade for the second.
	if fg.Spec.FeatureSet == configv1.Default {
		fg.Spec.FeatureSet = configv1.FeatureSet("OKD")
	} else {
		fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
	}
	if err := w.admin.Update(context.Background(), fg); err != nil {
		w.t.Fatal(err)
	}
	time.Sleep(time.Second)
	w.setEntry(func(d *configv1.FeatureGateDetails) { d.Enabled, d.Disabled = d.Disabled, d.Enabled })
}

func reorderEntry(w *world) {
	w.setEntry(func(d *configv1.FeatureGateDetails) {
		d.Enabled = append(d.Enabled, configv1.FeatureGateAttributes{Name: "GateC"})
	})
	// Settle on the three-gate list first, then reverse it.
	w.setEntry(func(d *configv1.FeatureGateDetails) { slices.Reverse(d.Enabled) })
}

func otherVersion(w *world) {
	fg := w.get()
	w.others++ // a new version each time: the API refuses two entries of one
	fg.Status.FeatureGates = append(fg.Status.FeatureGates, configv1.FeatureGateDetails{Version: fmt.Sprintf("4.21.%d", w.others),
		Enabled: []configv1.FeatureGateAttributes{{Name: "GateZ"}}, Disabled: []configv1.FeatureGateAttributes{}})
	if err := w.admin.Status().Update(context.Background(), fg); err != nil {
		w.t.Fatal(err)
	}
}

// exits runs one process per access, makes the change, and says whether
// it exited within 15 s.
func (w *world) exits(access string, c change) string {
	p := w.start(access, w.direct)
	if _, err := p.waitReady(time.Minute); err != nil {
		w.t.Fatalf("%s: not ready: %v", access, err)
	}
	c(w)
	select {
	case <-p.done:
		return fmt.Sprintf("1 (code %d)", p.code)
	case <-time.After(15 * time.Second):
		p.stop()
		return "0"
	}
}

func (w *world) get() *configv1.FeatureGate {
	fg := &configv1.FeatureGate{}
	if err := w.admin.Get(context.Background(), client.ObjectKey{Name: "cluster"}, fg); err != nil {
		w.t.Fatal(err)
	}
	return fg
}

// setEntry edits the version's entry through the status subresource.
func (w *world) setEntry(edit func(*configv1.FeatureGateDetails)) {
	fg := w.get()
	for i := range fg.Status.FeatureGates {
		if fg.Status.FeatureGates[i].Version == w.version {
			edit(&fg.Status.FeatureGates[i])
		}
	}
	if err := w.admin.Status().Update(context.Background(), fg); err != nil {
		w.t.Fatal(err)
	}
}

// cost runs a fleet of processes, waits for them to be ready and 5 s more,
// and counts the API server's requests on FeatureGates, ClusterVersions and
// Events over the window.
func (w *world) cost(access string, ask time.Duration) string {
	var fleet []*proc
	extra := []string{}
	if ask > 0 {
		extra = append(extra, "--ask-current="+ask.String())
	}
	for range *compareFleet {
		fleet = append(fleet, w.start(access, w.direct, extra...))
	}
	for _, p := range fleet {
		if _, err := p.waitReady(time.Minute); err != nil {
			w.t.Fatalf("%s: not ready: %v", access, err)
		}
	}
	time.Sleep(5 * time.Second)
	before := w.requests()
	time.Sleep(*compareWindow)
	after := w.requests()
	var wg sync.WaitGroup
	for _, p := range fleet {
		wg.Go(p.stop)
	}
	wg.Wait()
	var total float64
	var parts []string
	for _, k := range slices.Sorted(mapKeys(after)) {
		d := after[k] - before[k]
		if d <= 0 {
			continue
		}
		total += d
		parts = append(parts, fmt.Sprintf("%s %.2f", k, d/compareWindow.Seconds()))
	}
	return fmt.Sprintf("%.2f (%s)", total/compareWindow.Seconds(), strings.Join(parts, ", "))
}

func mapKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// requests reads apiserver_request_total for the kinds an access touches,
// summed by resource and verb.
func (w *world) requests() map[string]float64 {
	w.t.Helper()
	cfg := rest.CopyConfig(w.cp.Config)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") {
			continue
		}
		resource, verb := label(l, "resource"), label(l, "verb")
		if resource != "featuregates" && resource != "clusterversions" && resource != "events" {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		if err != nil {
			continue
		}
		out[resource+" "+verb] += v
	}
	return out
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// quantiles is p50 / p99 / max of ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(at(0.5)), r(at(0.99)), r(ds[len(ds)-1]))
}

// cutProxy forwards TCP to one target; cut closes every connection and
// refuses new ones until restore.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in] = true
		p.mu.Unlock()
		go p.pipe(in)
	}
}

func (p *cutProxy) pipe(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	p.conns[out] = true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
