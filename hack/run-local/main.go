// Command run-local runs the operator against a local control plane: it
// starts etcd and kube-apiserver (built from source into bin/k8s), installs
// the OpenShift CRDs, creates FeatureGate/cluster with $FEATURE_SET, writes
// a kubeconfig, and runs bin/manager in the foreground with the seed's
// payload (config/payload/manifests), its probes and metrics on loopback
// (8081 and 8443, or free ports when those are taken). Like a kubelet, it
// starts the operator again when it exits after a FeatureGate change. With
// $RELEASE_VERSION it also publishes status.featureGates for that version
// ($ENABLED_GATES, $DISABLED_GATES: comma lists) and passes
// --release-version to the operator. Operator flags after -- come last,
// and so win.
//
// Ctrl-C (or SIGTERM, or a closed terminal) stops the operator and tears
// everything down, whatever became of stdout: with `make run-local | tee
// log`, the terminal's Ctrl-C ends tee as well, and the cleanup still runs.
//
//	go run ./hack/run-local [-manager bin/manager] [-- operator flags...]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// out is where run-local talks. Its write errors are ignored: a reader
// that went away (tee, at Ctrl-C) must not stop the cleanup.
var out io.Writer = os.Stdout

func say(format string, args ...any) { _, _ = fmt.Fprintf(out, "run-local: "+format+"\n", args...) }

func main() {
	// A write to a closed stdout raises SIGPIPE, which kills a Go program
	// that does not handle it (signal.Ignore does not stop that): with the
	// signal delivered to a channel, the write fails with EPIPE instead.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	manager := flag.String("manager", "bin/manager", "Operator binary to run.")
	restarts := flag.Int("restarts", 5, "How many times to start the operator again after a clean exit, as a kubelet would.")
	flag.Parse()
	if err := run(*manager, *restarts, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(manager string, restarts int, operatorArgs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if _, err := os.Stat(manager); err != nil {
		return fmt.Errorf("operator binary: %w (run `make build`)", err)
	}
	featureSet := configv1.FeatureSet(os.Getenv("FEATURE_SET"))
	if featureSet == "Default" {
		featureSet = configv1.Default
	}
	root, err := controlplane.Root()
	if err != nil {
		return err
	}

	// One directory for everything, removed on the way out.
	dir, err := os.MkdirTemp("", "featuregate-run-local-")
	if err != nil {
		return err
	}
	defer cleanup(dir)
	say("starting etcd and kube-apiserver")
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "controlplane")})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "run-local: stop control plane:", err)
		}
	}()

	c, err := controlplane.NewClient(cp.Config)
	if err != nil {
		return err
	}
	// With RELEASE_VERSION, play the cluster-config-operator: publish the
	// gates of that version in status, and tell the operator its version.
	var status []controlplane.FeatureGateOption
	var defaults []string
	if version := os.Getenv("RELEASE_VERSION"); version != "" {
		status = append(status, controlplane.StatusGates(version, gates(os.Getenv("ENABLED_GATES")), gates(os.Getenv("DISABLED_GATES"))))
		defaults = append(defaults, "--release-version="+version)
	}
	fg := controlplane.FeatureGate(featureSet, status...)
	if err := controlplane.CreateFeatureGate(ctx, c, fg); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	probe, err := loopback(8081)
	if err != nil {
		return err
	}
	metrics, err := loopback(8443)
	if err != nil {
		return err
	}
	defaults = append(defaults,
		"--kubeconfig="+kubeconfig,
		"--manifests-dir="+filepath.Join(root, "config", "payload", "manifests"),
		"--health-probe-bind-address="+probe,
		"--metrics-bind-address="+metrics,
	)
	args := append(defaults, operatorArgs...)
	say(`control plane at %s, FeatureGate cluster created with feature set %s
run-local: the operator applies %s; probes on http://%s (/healthz, /readyz), metrics on https://%s/metrics
run-local: in another shell:
    export KUBECONFIG=%s
    alias kubectl=%s
    kubectl get featuregate cluster -o yaml
    kubectl patch featuregate cluster --type=merge -p '{"spec":{"featureSet":"TechPreviewNoUpgrade"}}'
    kubectl get namespace openshift-cluster-api    # applied once the operator runs with TechPreviewNoUpgrade
run-local: Ctrl-C stops the operator and the control plane`,
		cp.Host(), featureSetName(fg.Spec.FeatureSet), flagValue(args, "manifests-dir"), flagValue(args, "health-probe-bind-address"),
		flagValue(args, "metrics-bind-address"), kubeconfig, cp.Kubectl())

	for start := 0; ; start++ {
		code, err := runOperator(ctx, manager, args)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			say("operator exited %d after the interrupt", code)
			return nil
		}
		if code != 0 {
			return fmt.Errorf("operator exited %d", code)
		}
		if start >= restarts {
			return fmt.Errorf("operator exited %d times; not starting it again", start+1)
		}
		say("operator exited 0; starting it again, as the kubelet would")
	}
}

// cleanup removes dir once nothing runs from it: whatever of the control
// plane did not stop (or was stopped before its Stop by the terminal's
// signal) is killed first, found by the paths under dir in its arguments.
func cleanup(dir string) {
	for _, pid := range harness.ProcessesMentioning(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(harness.ProcessesMentioning(dir)) == 0, nil
	})
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "run-local: remove", dir+":", err)
	}
}

// loopback is 127.0.0.1:preferred when that port is free, else a free
// loopback port.
func loopback(preferred int) (string, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(preferred))
	if l, err := net.Listen("tcp", addr); err == nil {
		return addr, l.Close()
	}
	port, err := harness.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// flagValue is the value the operator will see for --name: the last one
// given.
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = rest
		}
	}
	return v
}

func featureSetName(s configv1.FeatureSet) string {
	if s == configv1.Default {
		return "Default"
	}
	return string(s)
}

// gates splits a comma list of gate names.
func gates(list string) []string {
	var out []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// runOperator runs the operator until it exits, passing an interrupt on to
// it as SIGTERM, the way a kubelet stops a container (the harness starts it
// in a process group of its own, so a terminal's Ctrl-C reaches only us and
// the operator gets exactly one SIGTERM: a second one means "exit now").
func runOperator(ctx context.Context, manager string, args []string) (int, error) {
	p, err := harness.Start(harness.Options{Name: "operator", Path: manager, Args: args, Echo: out})
	if err != nil {
		return 0, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Stop(time.Minute)
	}
	return p.ExitCode(), nil
}
