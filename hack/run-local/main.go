// Command run-local runs the operator against a local control plane: it
// starts etcd and kube-apiserver (built from source into bin/k8s), installs
// the OpenShift CRDs, creates FeatureGate/cluster with $FEATURE_SET, writes
// a kubeconfig, and runs bin/manager in the foreground. Like a kubelet, it
// starts the operator again when it exits after a FeatureGate change. With
// $RELEASE_VERSION it also publishes status.featureGates for that version
// ($ENABLED_GATES, $DISABLED_GATES: comma lists) and passes
// --release-version to the operator.
// Ctrl-C stops the operator and tears everything down.
//
//	go run ./hack/run-local [-manager bin/manager] [-- operator flags...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/internal/controlplane"
)

func main() {
	manager := flag.String("manager", "bin/manager", "Operator binary to run.")
	restarts := flag.Int("restarts", 5, "How many times to start the operator again after a clean exit, as a kubelet would.")
	flag.Parse()
	if err := run(*manager, *restarts, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(manager string, restarts int, operatorArgs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := os.Stat(manager); err != nil {
		return fmt.Errorf("operator binary: %w (run `make build`)", err)
	}
	featureSet := configv1.FeatureSet(os.Getenv("FEATURE_SET"))
	if featureSet == "Default" {
		featureSet = configv1.Default
	}

	fmt.Println("run-local: starting etcd and kube-apiserver")
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("run-local: stopping the control plane")
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
	if version := os.Getenv("RELEASE_VERSION"); version != "" {
		status = append(status, controlplane.StatusGates(version, gates(os.Getenv("ENABLED_GATES")), gates(os.Getenv("DISABLED_GATES"))))
		operatorArgs = append([]string{"--release-version=" + version}, operatorArgs...)
	}
	fg := controlplane.FeatureGate(featureSet, status...)
	if err := controlplane.CreateFeatureGate(ctx, c, fg); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "featuregate-run-local-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	fmt.Printf(`run-local: control plane at %s, FeatureGate cluster created with feature set %s
run-local: in another shell:
    export KUBECONFIG=%s
    alias kubectl=%s
    kubectl get featuregate cluster -o yaml
    kubectl patch featuregate cluster --type=merge -p '{"spec":{"featureSet":"TechPreviewNoUpgrade"}}'
run-local: Ctrl-C stops the operator and the control plane
`, cp.Host(), featureSetName(fg.Spec.FeatureSet), kubeconfig, cp.Kubectl())

	for start := 0; ; start++ {
		code, err := runOperator(ctx, manager, kubeconfig, operatorArgs)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			fmt.Printf("run-local: operator exited %d after the interrupt\n", code)
			return nil
		}
		if code != 0 {
			return fmt.Errorf("operator exited %d", code)
		}
		if start >= restarts {
			return fmt.Errorf("operator exited %d times; not starting it again", start+1)
		}
		fmt.Println("run-local: operator exited 0; starting it again, as the kubelet would")
	}
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

// runOperator runs the operator until it exits, passing an interrupt on as
// SIGTERM, the way a kubelet stops a container.
func runOperator(ctx context.Context, manager, kubeconfig string, args []string) (int, error) {
	cmd := exec.Command(manager, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: a terminal's Ctrl-C reaches only us, and the
	// operator gets exactly one SIGTERM (a second one means "exit now").
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-done:
		return exitCode(err)
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		return exitCode(<-done)
	}
}

func exitCode(err error) (int, error) {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
