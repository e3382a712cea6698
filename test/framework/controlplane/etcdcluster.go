package controlplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/featuregate-operator/operator/test/framework/faultproxy"
)

// etcdCluster is etcd as several members, the first envtest's own and the
// others processes of ours, so that one member can be partitioned from the
// others while an API server attached only to it keeps asking it: the
// member is up, its watches stay open and quiet, and its linearizable
// reads wait for a leader it cannot reach (Chubby's jeopardy).
//
// Every member's peer traffic goes through a fault proxy of its own, the
// URL it advertises. Members name themselves in each peer request
// (rafthttp's X-PeerURLs header: their advertised URLs), so a partition
// cuts the member's own proxy (no peer reaches it) and, on the others'
// proxies, the connections it opens (it reaches no peer).
type etcdCluster struct {
	binary string
	out    io.Writer
	// members[0] is envtest's etcd, its process envtest's to run.
	members []*etcdMember
}

type etcdMember struct {
	name   string
	client *url.URL
	flags  []string
	proxy  *faultproxy.Proxy // in front of its peer port: the URL it advertises

	mu  sync.Mutex
	cmd *exec.Cmd // ours only, while it runs
	// exited is closed when cmd's process was reaped.
	exited chan struct{}
}

// newEtcdCluster prepares n members in dir and makes envtest's etcd the
// first.
func newEtcdCluster(n int, etcd *envtest.Etcd, assets, dir string, out io.Writer) (*etcdCluster, error) {
	ec := &etcdCluster{binary: filepath.Join(assets, "etcd"), out: out}
	listen := make([]string, n)
	for i := range n {
		client, err := freeAddr()
		if err != nil {
			return ec, err
		}
		if listen[i], err = freeAddr(); err != nil {
			return ec, err
		}
		proxy, err := faultproxy.NewHTTP("X-PeerURLs", listen[i])
		if err != nil {
			return ec, err
		}
		ec.members = append(ec.members, &etcdMember{name: fmt.Sprintf("member-%d", i),
			client: &url.URL{Scheme: "http", Host: client}, proxy: proxy})
	}
	peers := make([]string, 0, n)
	for _, m := range ec.members {
		peers = append(peers, m.name+"="+m.peerURL())
	}
	for i, m := range ec.members {
		flags := map[string]string{
			"name":                        m.name,
			"data-dir":                    filepath.Join(dir, m.name),
			"listen-client-urls":          m.client.String(),
			"advertise-client-urls":       m.client.String(),
			"listen-peer-urls":            "http://" + listen[i],
			"initial-advertise-peer-urls": m.peerURL(),
			"initial-cluster":             strings.Join(peers, ","),
			"initial-cluster-state":       "new",
			"initial-cluster-token":       "featuregate-controlplane",
			"unsafe-no-fsync":             "true",
		}
		if i == 0 {
			// envtest writes data-dir and the client URLs from these.
			etcd.URL, etcd.DataDir = m.client, flags["data-dir"]
			for _, k := range []string{"data-dir", "listen-client-urls", "advertise-client-urls", "unsafe-no-fsync"} {
				delete(flags, k)
			}
			for k, v := range flags {
				etcd.Configure().Set(k, v)
			}
			continue
		}
		for k, v := range flags {
			m.flags = append(m.flags, "--"+k+"="+v)
		}
	}
	return ec, nil
}

func (m *etcdMember) peerURL() string { return "http://" + m.proxy.Addr() }

// startOthers starts the members envtest does not run. They wait for a
// quorum, which envtest's member completes: start them first.
func (ec *etcdCluster) startOthers() error {
	for _, m := range ec.members[1:] {
		if err := m.start(ec.binary, ec.out); err != nil {
			return err
		}
	}
	return nil
}

// stopOthers kills the members envtest does not run.
func (ec *etcdCluster) stopOthers() error {
	errs := make(chan error, len(ec.members))
	for _, m := range ec.members[1:] {
		go func() { errs <- m.stop() }()
	}
	var all []error
	for range ec.members[1:] {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// close stops our members and the peer proxies.
func (ec *etcdCluster) close() error {
	err := ec.stopOthers()
	for _, m := range ec.members {
		if m.proxy != nil {
			m.proxy.Close()
		}
	}
	return err
}

// partition cuts member i off from every other member, or heals it.
func (ec *etcdCluster) partition(i int, cut bool) error {
	if i < 0 || i >= len(ec.members) {
		return fmt.Errorf("no etcd member %d of %d", i, len(ec.members))
	}
	m := ec.members[i]
	if cut {
		m.proxy.Cut()
	} else {
		m.proxy.Restore()
	}
	for j, other := range ec.members {
		if j == i {
			continue
		}
		if cut {
			other.proxy.CutFrom(m.peerURL())
		} else {
			other.proxy.RestoreFrom(m.peerURL())
		}
	}
	return nil
}

func (m *etcdMember) start(binary string, out io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	cmd := exec.Command(binary, m.flags...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd %s: %w", m.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	m.cmd, m.exited = cmd, exited
	return nil
}

// stop kills the member, as a node's crash does, and reaps it: fast, and
// no leadership handed over.
func (m *etcdMember) stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return nil
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd, m.exited = nil, nil
	return nil
}

// freeAddr is a loopback host:port free a moment ago, as envtest picks its
// own.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
