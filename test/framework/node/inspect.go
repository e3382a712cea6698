package node

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// PodVolume is where the kubelet mounted a pod's volume on the node: what
// the pod's containers see, read from the host ("kubernetes.io~projected"
// for the ServiceAccount token volume).
func (n *Node) PodVolume(pod types.UID, plugin, volume string) string {
	return n.path("kubelet", "root", "pods", string(pod), "volumes", plugin, volume)
}

// ContainerPID is the host pid of a container's init process, from its
// CRI id ("containerd://<id>" in a pod's status, or <id>).
func (n *Node) ContainerPID(ctx context.Context, containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.containerdSocket(), "--namespace", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id {
			if f[2] != "RUNNING" {
				return 0, fmt.Errorf("container %s is %s", id, f[2])
			}
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("container %s has no task", id)
}

// SecondAPIServer starts another kube-apiserver on the node's etcd,
// listening on loopback only, where no pod reaches it: a way to change the
// cluster while the node's API server is stopped for an outage. stop
// stops it; Stop does too.
func (n *Node) SecondAPIServer(ctx context.Context) (cfg *rest.Config, stop func(), err error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, nil, err
	}
	first := n.specs["kube-apiserver"]
	var args []string
	for _, a := range first.Args {
		switch {
		case strings.HasPrefix(a, "--bind-address="):
			a = "--bind-address=127.0.0.1"
		case strings.HasPrefix(a, "--secure-port="):
			a = fmt.Sprintf("--secure-port=%d", port)
		case strings.HasPrefix(a, "--cert-dir="):
			a = "--cert-dir=" + n.path("apiserver-2")
		}
		args = append(args, a)
	}
	name := "kube-apiserver-2"
	if err := n.run(name, first.Path, args...); err != nil {
		return nil, nil, err
	}
	cfg = rest.CopyConfig(n.Admin)
	cfg.Host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := n.waitAPIServer(ctx, name, cfg); err != nil {
		n.stop(name)
		return nil, nil, err
	}
	return cfg, func() { n.stop(name) }, nil
}
