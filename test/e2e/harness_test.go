package e2e

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/featuregate-operator/operator/internal/controlplane"
)

// Set by TestMain.
var (
	// managerBin is the operator, built from this checkout.
	managerBin string
	// repoRoot is the checkout, for test data.
	repoRoot string
	// assetsDir holds etcd, kube-apiserver and kubectl.
	assetsDir string
)

// maxControlPlanes bounds how many control planes run at once: each is an
// etcd and a kube-apiserver, and the machine has two cores.
const maxControlPlanes = 2

var controlPlaneSlots = make(chan struct{}, maxControlPlanes)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	// The test's own clients log nothing worth reading; the operator's log
	// is what the tests read.
	ctrllog.SetLogger(logr.Discard())
	// Gomega polls every 10 ms by default; each failed /readyz poll is an
	// operator log line, and the machine is shared.
	gomega.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	gomega.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	var err error
	if repoRoot, err = controlplane.Root(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if assetsDir, err = controlplane.AssetsDir(""); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "featuregate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	managerBin = filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", managerBin, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build the operator: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	faults.summary(os.Stdout)
	return code
}

// lane marks t parallel and waits for a control plane slot, released when t
// ends. Tests that start a control plane call it first.
func lane(t *testing.T) {
	t.Helper()
	t.Parallel()
	controlPlaneSlots <- struct{}{}
	t.Cleanup(func() { <-controlPlaneSlots })
}

// startControlPlane starts etcd and kube-apiserver with the given CRD files
// (nil: the OpenShift FeatureGate and ClusterOperator CRDs), stopped when t
// ends.
func startControlPlane(t *testing.T, crds []string) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: assetsDir, CRDs: crds})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// newClient is a client for cfg knowing the core and OpenShift config types.
// Each request is bounded, so that a poll never hangs on a dead server.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 30 * time.Second
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// featureGate is FeatureGate/cluster with the given feature set.
func featureGate(set configv1.FeatureSet) *configv1.FeatureGate {
	return &configv1.FeatureGate{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.FeatureGateSpec{FeatureGateSelection: configv1.FeatureGateSelection{FeatureSet: set}},
	}
}

// createFeatureGate creates FeatureGate/cluster with the given feature set.
func createFeatureGate(t *testing.T, c client.Client, set configv1.FeatureSet) *configv1.FeatureGate {
	t.Helper()
	fg := featureGate(set)
	if err := c.Create(t.Context(), fg); err != nil {
		t.Fatalf("create FeatureGate cluster: %v", err)
	}
	return fg
}

// setFeatureSet changes FeatureGate/cluster's feature set with a merge patch,
// as `kubectl patch` would.
func setFeatureSet(t *testing.T, c client.Client, set configv1.FeatureSet) {
	t.Helper()
	fg := featureGate("")
	patch := fmt.Appendf(nil, `{"spec":{"featureSet":%q}}`, set)
	if err := c.Patch(t.Context(), fg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("set feature set %q: %v", set, err)
	}
}

// kubeconfigFor writes a kubeconfig for cfg, with its server replaced by
// server when not empty (to go through a proxy), and returns its path.
func kubeconfigFor(t *testing.T, cfg *rest.Config, server string) string {
	t.Helper()
	if server == "" {
		server = cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
	}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfig writes the control plane's admin kubeconfig.
func kubeconfig(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort is a loopback TCP port nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// logBuffer collects a process's output lines; safe for concurrent use.
type logBuffer struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
	hooks   []*lineHook
}

// lineHook is a function run once, as soon as a line containing substr is
// written.
type lineHook struct {
	substr string
	fn     func()
	fired  bool
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	var fire []func()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.lines = append(b.lines, line)
		b.partial = b.partial[i+1:]
		for _, h := range b.hooks {
			if !h.fired && strings.Contains(line, h.substr) {
				h.fired = true
				fire = append(fire, h.fn)
			}
		}
	}
	b.mu.Unlock()
	for _, fn := range fire {
		fn()
	}
	return len(p), nil
}

// OnLine runs fn once, in the goroutine copying the output, as soon as a line
// containing substr arrives: to act on a log line faster than polling can,
// e.g. to signal a process in the middle of its shutdown.
func (b *logBuffer) OnLine(substr string, fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, &lineHook{substr: substr, fn: fn})
}

// Lines returns the complete lines so far.
func (b *logBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// String is the whole output so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n") + "\n" + string(b.partial)
}

// Count is the number of lines containing s.
func (b *logBuffer) Count(s string) int {
	n := 0
	for _, l := range b.Lines() {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// Index is the index of the first line containing s, or -1.
func (b *logBuffer) Index(s string) int {
	for i, l := range b.Lines() {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

// operator is bin/manager running as a child process in its own process
// group, its stdout and stderr (JSON log lines) collected.
type operator struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	probe string // health probe address
	Log   *logBuffer

	done chan struct{}
	code int // valid once done is closed
}

// startOperator starts the manager with kubeconfig and args, health probes on
// a free loopback port and metrics off; args may override those. The process
// is killed when t ends, and its log shown if t failed.
func startOperator(t *testing.T, name, kubeconfig string, args ...string) *operator {
	t.Helper()
	o := &operator{t: t, name: name, probe: "127.0.0.1:" + strconv.Itoa(freePort(t)), Log: &logBuffer{}, done: make(chan struct{})}
	full := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--health-probe-bind-address=" + o.probe,
		"--metrics-bind-address=0",
	}, args...)
	o.cmd = exec.Command(managerBin, full...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			o.cmd.Env = append(o.cmd.Env, kv)
		}
	}
	o.cmd.Stdout, o.cmd.Stderr = o.Log, o.Log
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := o.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = o.cmd.Wait()
		o.code = o.cmd.ProcessState.ExitCode()
		close(o.done)
	}()
	t.Cleanup(o.cleanup)
	return o
}

func (o *operator) cleanup() {
	if !o.Exited() {
		_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-o.done:
		case <-time.After(10 * time.Second):
			o.t.Errorf("%s: still running 10s after SIGKILL", o.name)
		}
	}
	if o.t.Failed() {
		lines := o.Log.Lines()
		if len(lines) > 130 {
			o.t.Logf("%s: first 30 of %d log lines:\n%s", o.name, len(lines), strings.Join(lines[:30], "\n"))
			lines = lines[len(lines)-100:]
		}
		o.t.Logf("%s: last %d log lines (exited: %v, code %d):\n%s", o.name, len(lines), o.Exited(), o.exitCode(), strings.Join(lines, "\n"))
	}
}

// exitCode is the exit code once exited, else 0.
func (o *operator) exitCode() int {
	if o.Exited() {
		return o.code
	}
	return 0
}

// Exited reports whether the process has ended.
func (o *operator) Exited() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// Running is !Exited, for Consistently.
func (o *operator) Running() bool { return !o.Exited() }

// WaitExit waits up to timeout for the process to end and returns its exit
// code; the test fails if it does not end.
func (o *operator) WaitExit(timeout time.Duration) int {
	o.t.Helper()
	select {
	case <-o.done:
		return o.code
	case <-time.After(timeout):
		o.t.Fatalf("%s: still running after %s", o.name, timeout)
		return -1
	}
}

// Signal sends sig to the process.
func (o *operator) Signal(sig os.Signal) {
	o.t.Helper()
	if err := o.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		o.t.Fatalf("%s: signal %v: %v", o.name, sig, err)
	}
}

// WaitForLog waits up to timeout for a log line containing substr. It gives
// up early when the process has exited without writing it.
func (o *operator) WaitForLog(substr string, timeout time.Duration) {
	o.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if o.Log.Index(substr) >= 0 {
			return
		}
		if o.Exited() {
			// The output is complete once Wait returned.
			if o.Log.Index(substr) >= 0 {
				return
			}
			o.t.Fatalf("%s: exited %d without logging %q", o.name, o.code, substr)
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("%s: no log line containing %q after %s", o.name, substr, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var probeClient = &http.Client{Timeout: 5 * time.Second}

// Readyz GETs a path of the health probe server: its status code and body.
func (o *operator) Readyz(path string) (int, string, error) {
	resp, err := probeClient.Get("http://" + o.probe + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Ready reports whether /readyz answers 200.
func (o *operator) Ready() bool {
	code, _, err := o.Readyz("/readyz")
	return err == nil && code == http.StatusOK
}

// ReadyzStatus is /readyz's status code, 0 when it does not answer.
func (o *operator) ReadyzStatus() int {
	code, _, _ := o.Readyz("/readyz")
	return code
}

// ReadyzBody is the body of /readyz/featuregate, the check that carries the
// reason; "" when it does not answer.
func (o *operator) ReadyzBody() string {
	_, body, _ := o.Readyz("/readyz/featuregate")
	return body
}

// faultResults counts the fault scenarios for the summary line.
type faultResults struct {
	mu             sync.Mutex
	passed, failed int
}

var faults faultResults

func (r *faultResults) record(pass bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pass {
		r.passed++
	} else {
		r.failed++
	}
}

// summary prints "<N> passed, <M> failed" when any fault scenario ran.
func (r *faultResults) summary(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.passed+r.failed > 0 {
		fmt.Fprintf(w, "%d passed, %d failed\n", r.passed, r.failed)
	}
}

// fault is one fault scenario's result line.
type fault struct {
	mu     sync.Mutex
	detail string
}

// Detail sets what the result line says besides PASS/FAIL.
func (f *fault) Detail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detail = fmt.Sprintf(format, args...)
}

// startFault begins a fault scenario: it takes a control plane lane, and
// when t ends (after every other cleanup) prints
// "FAULT PASS|FAIL <name>  <detail>  <seconds>s" for `make test-faults`.
func startFault(t *testing.T, name string) *fault {
	t.Helper()
	lane(t)
	f := &fault{}
	start := time.Now()
	t.Cleanup(func() {
		f.mu.Lock()
		detail := f.detail
		f.mu.Unlock()
		result := "PASS"
		if t.Failed() {
			result = "FAIL"
			if detail == "" {
				detail = "see the test log"
			}
		}
		faults.record(!t.Failed())
		fmt.Printf("FAULT %s %s  %s  %.1fs\n", result, name, detail, time.Since(start).Seconds())
	})
	return f
}
