// Package node runs a single-node Kubernetes cluster on this machine, as
// root, from the binaries `make cluster-assets` builds into bin/k8s (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
// kube-proxy) and the distribution's containerd, runc and CNI plugins: what
// `make test-cluster` runs the operator on, so that a real kubelet restarts
// it, probes it and mounts its ServiceAccount token.
//
// Everything lives in one directory and on one bridge of its own: pods get
// addresses on it, the API server listens on its address (pods reach it
// through the kubernetes Service, as in a cluster), and the Service range is
// routed to it, so no packet of the node leaves the machine. The host is
// captured before the node starts; Stop puts back what the node changed
// (processes, mounts, interfaces, iptables rules, kernel settings, cgroups)
// and Leftovers says what, if anything, it could not.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The node's network. The ranges are private and routed to the bridge
// alone.
const (
	// Name is the node's name.
	Name       = "featuregate-node"
	bridge     = "fgnode0"
	podCIDR    = "10.217.0.0/24"
	serviceIP  = "10.217.1.1" // the kubernetes Service: the range's first
	serviceNet = "10.217.1.0/24"
	apiPort    = 6443
)

// BridgeIP is the bridge's address: the pods' gateway, the node's IP, and
// where the API server and the kubelet listen.
var BridgeIP = net.IPv4(10, 217, 0, 1)

// Options says where the binaries are and what to bring.
type Options struct {
	// Assets holds etcd, kube-apiserver, kubectl, kubelet,
	// kube-controller-manager, kube-scheduler and kube-proxy.
	Assets string
	// LogDir receives one log file per component; it outlives the node.
	LogDir string
	// Images are image archives imported into the container runtime before
	// the kubelet starts; PauseImage, the sandbox image, must be one of them.
	Images     []string
	PauseImage string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// Node is a running single-node cluster.
type Node struct {
	// Dir holds every file of the node; Stop removes it.
	Dir string
	// Admin is a system:masters client configuration, and Kubeconfig the
	// same as a file, for kubectl.
	Admin      *rest.Config
	Kubeconfig string
	// Clientset is Admin's.
	Clientset *kubernetes.Clientset

	opts    Options
	before  *hostState
	etcdURL string
	procs   map[string]*harness.Process
	specs   map[string]harness.Options
	// stopped are the components stopped on purpose.
	stopped map[string]bool
	// order is the order the components started in; they stop in reverse.
	order []string
}

// Start captures the host, then brings the node up: network, etcd, API
// server, controller manager, scheduler, containerd (with opts.Images),
// kubelet and kube-proxy, and returns once the node is Ready. On error
// everything is torn down again; the Node returned, if any, still answers
// Leftovers.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the node needs root (containerd, the kubelet, a bridge, iptables)")
	}
	if err := checkTools(opts.Assets); err != nil {
		return nil, err
	}
	if err := Busy(); err != nil {
		return nil, err
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	before, err := captureHost()
	if err != nil {
		return nil, fmt.Errorf("capture the host before the node: %w", err)
	}
	dir, err := os.MkdirTemp("", "featuregate-node-")
	if err != nil {
		return nil, err
	}
	n := &Node{Dir: dir, opts: opts, before: before, procs: map[string]*harness.Process{}, specs: map[string]harness.Options{}, stopped: map[string]bool{}}
	if err := n.start(ctx); err != nil {
		return n, errors.Join(err, n.Stop())
	}
	return n, nil
}

// Busy reports another node running on this host (another `make
// test-cluster`, in another checkout): two would share the bridge, the pods'
// cgroups and iptables, and each one's teardown would sweep away the
// other's pods. Nothing is touched then.
func Busy() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridge)); err == nil {
		return fmt.Errorf("another node runs on this host (network interface %s exists; another `make test-cluster`?): not starting a second one", bridge)
	}
	if cgs := podCgroups(); len(cgs) > 0 {
		return fmt.Errorf("another node runs on this host (cgroup %s exists; another kubelet?): not starting a second one", cgs[0])
	}
	return nil
}

// checkTools reports the first binary the node needs that is missing.
func checkTools(assets string) error {
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return fmt.Errorf("%s missing in %s (run `make cluster-assets`): %w", b, assets, err)
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found (apt-get install containerd runc containernetworking-plugins iptables): %w", b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		return fmt.Errorf("CNI plugins missing (apt-get install containernetworking-plugins): %w", err)
	}
	return nil
}

func (n *Node) path(parts ...string) string {
	return filepath.Join(append([]string{n.Dir}, parts...)...)
}

func (n *Node) start(ctx context.Context) error {
	pki, err := newPKI(n.path("pki"))
	if err != nil {
		return err
	}
	ips := []net.IP{BridgeIP, net.ParseIP(serviceIP), net.IPv4(127, 0, 0, 1)}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if err := errors.Join(
		pki.issue("apiserver", "kube-apiserver", nil, ips, dns),
		pki.issue("kubelet", Name, nil, []net.IP{BridgeIP, net.IPv4(127, 0, 0, 1)}, []string{Name}),
		pki.issue("admin", "featuregate-node-admin", []string{"system:masters"}, nil, nil),
	); err != nil {
		return err
	}
	n.Admin = &rest.Config{
		Host:            fmt.Sprintf("https://%s", net.JoinHostPort(BridgeIP.String(), fmt.Sprint(apiPort))),
		TLSClientConfig: rest.TLSClientConfig{CAFile: pki.path("ca.crt"), CertFile: pki.path("admin.crt"), KeyFile: pki.path("admin.key")},
		QPS:             100,
		Burst:           200,
	}
	if err := rest.LoadTLSFiles(n.Admin); err != nil {
		return err
	}
	n.Kubeconfig = n.path("admin.kubeconfig")
	if err := harness.WriteKubeconfig(n.Kubeconfig, n.Admin); err != nil {
		return err
	}
	if n.Clientset, err = kubernetes.NewForConfig(n.Admin); err != nil {
		return err
	}

	n.opts.Logf("node: network (bridge %s %s, Services %s)", bridge, podCIDR, serviceNet)
	if err := n.network(); err != nil {
		return err
	}
	if err := n.startEtcd(); err != nil {
		return err
	}
	if err := n.startAPIServer(ctx, pki); err != nil {
		return err
	}
	if err := n.kubernetesEndpoints(ctx); err != nil {
		return err
	}
	if err := n.startControllers(pki); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.startKubelet(ctx, pki); err != nil {
		return err
	}
	return n.startProxy(ctx)
}

// network creates the bridge with its address (the CNI bridge plugin finds
// it and uses it), routes the Service range to it, and refuses to forward
// anything from it elsewhere: pods talk to each other and to the node,
// never past it.
func (n *Node) network() error {
	for _, args := range [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", BridgeIP.String() + "/24", "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
		{"ip", "route", "add", serviceNet, "dev", bridge, "src", BridgeIP.String()},
		{"iptables", "-I", "FORWARD", "1", "-i", bridge, "!", "-o", bridge, "-j", "DROP"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// run starts a component, logging to LogDir/<name>.log.
func (n *Node) run(name string, path string, args ...string) error {
	opts := harness.Options{Name: name, Path: path, Args: args, LogFile: filepath.Join(n.opts.LogDir, name+".log")}
	n.specs[name] = opts
	n.order = append(n.order, name)
	return n.restart(name)
}

func (n *Node) restart(name string) error {
	p, err := harness.Start(n.specs[name])
	if err != nil {
		return err
	}
	n.procs[name] = p
	delete(n.stopped, name)
	return nil
}

func (n *Node) asset(name string) string { return filepath.Join(n.opts.Assets, name) }

func (n *Node) startEtcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	client, peer := ports[0], ports[1]
	n.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	n.opts.Logf("node: etcd on %s", n.etcdURL)
	return n.run("etcd", n.asset("etcd"),
		"--data-dir="+n.path("etcd"),
		"--listen-client-urls="+n.etcdURL,
		"--advertise-client-urls="+n.etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peer),
		"--unsafe-no-fsync",
	)
}

// startAPIServer starts kube-apiserver on the bridge's address. The
// endpoints of the kubernetes Service are the node's to write
// (--endpoint-reconciler-type=none): they stay put while the API server is
// stopped for an outage, so that it is reachable the moment it is back.
func (n *Node) startAPIServer(ctx context.Context, pki *pki) error {
	n.opts.Logf("node: kube-apiserver on %s", n.Admin.Host)
	err := n.run("kube-apiserver", n.asset("kube-apiserver"),
		"--etcd-servers="+n.etcdURL,
		"--bind-address="+BridgeIP.String(),
		"--advertise-address="+BridgeIP.String(),
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range="+serviceNet,
		"--cert-dir="+n.path("apiserver"),
		"--tls-cert-file="+pki.path("apiserver.crt"),
		"--tls-private-key-file="+pki.path("apiserver.key"),
		"--client-ca-file="+pki.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pki.path("sa.pub"),
		"--service-account-signing-key-file="+pki.path("sa.key"),
		"--authorization-mode=RBAC",
		"--kubelet-client-certificate="+pki.path("admin.crt"),
		"--kubelet-client-key="+pki.path("admin.key"),
		"--kubelet-preferred-address-types=InternalIP",
		// Stop at once in outage tests rather than wait for watches.
		"--shutdown-watch-termination-grace-period=1s",
	)
	if err != nil {
		return err
	}
	return n.waitAPIServer(ctx, "kube-apiserver", n.Admin)
}

// waitAPIServer waits for the /readyz of the API server at cfg to answer
// ok.
func (n *Node) waitAPIServer(ctx context.Context, name string, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return n.poll(ctx, name+" ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Timeout(5 * time.Second).DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// StopAPIServer stops kube-apiserver (SIGTERM), as an outage; the rest of
// the node keeps running.
func (n *Node) StopAPIServer() {
	n.stop("kube-apiserver")
}

// StartAPIServer starts kube-apiserver again, with the same address,
// certificates and etcd, and waits until it is ready.
func (n *Node) StartAPIServer(ctx context.Context) error {
	if err := n.restart("kube-apiserver"); err != nil {
		return err
	}
	return n.waitAPIServer(ctx, "kube-apiserver", n.Admin)
}

// kubernetesEndpoints publishes the API server's address as the endpoints
// of the kubernetes Service, once the API server has created the Service.
func (n *Node) kubernetesEndpoints(ctx context.Context) error {
	err := n.poll(ctx, "the kubernetes Service", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := n.Clientset.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "kubernetes",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "featuregate-node"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{BridgeIP.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](apiPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := n.Clientset.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("EndpointSlice default/kubernetes: %w", err)
	}
	return nil
}

// startControllers starts kube-controller-manager and kube-scheduler.
// The node lifecycle controller is given longer than an outage test's
// minute before it calls a node unreachable (and its pods not ready): the
// kubelet cannot renew its lease while the API server is down.
func (n *Node) startControllers(pki *pki) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	kcmPort, schedPort := ports[0], ports[1]
	n.opts.Logf("node: kube-controller-manager, kube-scheduler")
	return errors.Join(
		n.run("kube-controller-manager", n.asset("kube-controller-manager"),
			"--kubeconfig="+n.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", kcmPort),
			"--root-ca-file="+pki.path("ca.crt"),
			"--service-account-private-key-file="+pki.path("sa.key"),
			"--use-service-account-credentials=false",
			"--service-cluster-ip-range="+serviceNet,
			"--node-monitor-grace-period=3m",
		),
		n.run("kube-scheduler", n.asset("kube-scheduler"),
			"--kubeconfig="+n.Kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", schedPort),
		),
	)
}

// freePorts is count loopback ports nobody listened on a moment ago, for
// the components' own endpoints (health, metrics, peers).
func freePorts(count int) ([]int, error) {
	ports := make([]int, count)
	for i := range ports {
		p, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}
