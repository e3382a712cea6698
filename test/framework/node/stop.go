package node

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// poll calls cond every 250 ms until it is true, for at most timeout; the
// error names what was awaited.
// It gives up at once when a component has exited.
func (n *Node) poll(ctx context.Context, what string, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range n.order {
			if p := n.procs[name]; p.Exited() && !n.stopped[name] {
				return false, fmt.Errorf("%s exited (code %d); log: %s", name, p.ExitCode(), p.LogPath())
			}
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("node: waiting for %s: %w (logs in %s)", what, err, n.opts.LogDir)
	}
	return nil
}

// Process is a running component ("kubelet", "kube-apiserver", ...), for
// its log.
func (n *Node) Process(name string) *harness.Process { return n.procs[name] }

// Kubectl runs the node's kubectl as the admin and returns its output
// (stdout and stderr).
func (n *Node) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, n.asset("kubectl"), append([]string{"--kubeconfig=" + n.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Stop tears the node down and puts the host back as Start found it. It
// stops the controllers first (nothing is recreated), has the kubelet stop
// every pod (so that the CNI plugin and the runtime undo their own work),
// stops the components in reverse order, and then sweeps whatever is left,
// whether or not the rest went well.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		n.stop(name)
	}
	if n.running("kube-apiserver") && n.running("kubelet") {
		errs = append(errs, n.stopPods(ctx))
	}
	for i := len(n.order) - 1; i >= 0; i-- {
		n.stop(n.order[i])
	}
	assets, _ := filepath.Abs(n.opts.Assets)
	errs = append(errs, n.before.sweep(n.Dir, assets))
	return errors.Join(errs...)
}

func (n *Node) running(name string) bool {
	p := n.procs[name]
	return p != nil && p.Running()
}

func (n *Node) stop(name string) {
	if p := n.procs[name]; p != nil {
		n.stopped[name] = true
		p.Stop(20 * time.Second)
	}
}

// stopPods deletes every pod and waits until the runtime runs no task.
func (n *Node) stopPods(ctx context.Context) error {
	namespaces, err := n.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("node: list namespaces: %w", err)
	}
	for _, ns := range namespaces.Items {
		err := n.Clientset.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("node: delete the pods of %s: %w", ns.Name, err)
		}
	}
	return n.poll(ctx, "every pod stopped", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.containerdSocket(), "--namespace", "k8s.io", "tasks", "ls", "-q").Output()
		return err == nil && strings.TrimSpace(string(out)) == "", nil
	})
}

// Leftovers lists what the node left on the host after Stop: processes,
// mounts, network interfaces, iptables rules, kernel settings, cgroups,
// directories. Empty means the host is as Start found it.
func (n *Node) Leftovers() []string {
	assets, _ := filepath.Abs(n.opts.Assets)
	return n.before.leftovers(n.Dir, assets)
}
