package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

func (n *Node) containerdSocket() string { return n.path("containerd", "containerd.sock") }

// startContainerd starts containerd with its root, state, runc root and
// network namespaces under the node's directory, and imports the images.
// restrict_oom_score_adj: runc may not lower its own OOM score here
// ("failed to update /proc/self/oom_score_adj: Permission denied").
func (n *Node) startContainerd(ctx context.Context) error {
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		n.path("containerd", "opt"), n.opts.PauseImage, n.path("containerd", "runc"), cniBinDir, n.path("cni", "net.d"))
	// host-local keeps its leases under the node's directory too.
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "featuregate-node",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "isDefaultGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "dataDir": %q
    }
  }]
}
`, bridge, podCIDR, BridgeIP.String(), n.path("cni", "ipam"))
	if err := writeFiles(map[string]string{
		n.path("containerd", "config.toml"):               config,
		n.path("cni", "net.d", "10-featuregate.conflist"): cni,
	}); err != nil {
		return err
	}
	n.opts.Logf("node: containerd")
	if err := n.run("containerd", "containerd", "--config="+n.path("containerd", "config.toml")); err != nil {
		return err
	}
	err := n.poll(ctx, "containerd", time.Minute, func(ctx context.Context) (bool, error) {
		return n.ctr(ctx, "version") == nil, nil
	})
	if err != nil {
		return err
	}
	for _, archive := range n.opts.Images {
		n.opts.Logf("node: import %s", archive)
		if err := n.ctr(ctx, "images", "import", archive); err != nil {
			return err
		}
	}
	return nil
}

// ctr runs containerd's client against the node's containerd, in the
// namespace the CRI plugin serves.
func (n *Node) ctr(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// startKubelet starts the kubelet and waits for the node to be Ready. The
// machines are cgroup v1 (failCgroupV1: false, cgroupfs); the pods get an
// empty resolv.conf (no name server to reach); image garbage collection is
// off (the images cannot be pulled again); eviction thresholds are low,
// so that a busy disk does not taint the node.
func (n *Node) startKubelet(ctx context.Context, pki *pki) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	healthz := ports[0]
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
resolvConf: %s
podLogsDir: %s
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
`, n.containerdSocket(), BridgeIP, healthz, pki.path("kubelet.crt"), pki.path("kubelet.key"), pki.path("ca.crt"),
		n.path("kubelet", "resolv.conf"), n.path("kubelet", "pods-logs"))
	if err := writeFiles(map[string]string{
		n.path("kubelet", "config.yaml"): config,
		n.path("kubelet", "resolv.conf"): "",
	}); err != nil {
		return err
	}
	n.opts.Logf("node: kubelet")
	err = n.run("kubelet", n.asset("kubelet"),
		"--config="+n.path("kubelet", "config.yaml"),
		"--kubeconfig="+n.Kubeconfig,
		"--root-dir="+n.path("kubelet", "root"),
		"--volume-plugin-dir="+n.path("kubelet", "volume-plugins"),
		"--hostname-override="+Name,
		"--node-ip="+BridgeIP.String(),
		// The HTTP prober logs the bodies it reads (why /readyz fails).
		"--vmodule=http=4",
	)
	if err != nil {
		return err
	}
	return n.poll(ctx, "node "+Name+" Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// startProxy starts kube-proxy in iptables mode and waits until it has
// programmed the Services (its healthz answers 200). It changes no
// conntrack settings and serves NodePorts on no loopback address, so that
// it leaves the kernel's settings alone.
func (n *Node) startProxy(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	healthz, metrics := ports[0], ports[1]
	n.opts.Logf("node: kube-proxy")
	err = n.run("kube-proxy", n.asset("kube-proxy"),
		"--kubeconfig="+n.Kubeconfig,
		"--hostname-override="+Name,
		"--cluster-cidr="+podCIDR,
		"--proxy-mode=iptables",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", healthz),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
	)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz)
	return n.poll(ctx, "kube-proxy synced", 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
