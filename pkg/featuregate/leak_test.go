package featuregate_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// Nothing of the guard outlives its manager's Start: its goroutines end and
// its connections are closed, even those that were not idle. A connection
// that carried a request cancelled by the stop is not idle until the server
// acknowledges the reset, and a frozen server never does: closing idle
// connections, as a stock manager's caller does, leaves its read loop
// running for the idle timeout.
func TestGuardLeavesNothingRunningAfterStart(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	proxy := newFreezingProxy(t, cp.Config.Host)
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = "https://" + proxy.addr()

	ignore := goleak.IgnoreCurrent()
	gd := newGuardOn(t, cfg, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{})
	ctx, cancel, done := startReturning(t, mgr)
	gd.current(t)
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	proxy.freeze()
	cancel()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	g.Eventually(func() error {
		return goleak.Find(ignore, goleak.IgnoreAnyFunction("github.com/featuregate-operator/operator/pkg/featuregate_test.(*freezingProxy).pipe"))
	}).WithTimeout(5*time.Second).Should(Succeed(), "left running after Start returned")
}

// The manager's cache is built once the snapshot is taken, and building
// it asks the API through discovery, whose requests take no context: a
// build that hangs (an API server frozen at that moment) must not hold the
// stop for the manager's whole grace period and fail Start. Here the
// adopter's NewCache hangs until the test ends.
func TestGuardStopsWhileItsCacheHangsInTheBuild(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	building := make(chan struct{}, 1)
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{NewCache: func(*rest.Config, cache.Options) (cache.Cache, error) {
		building <- struct{}{}
		<-hang
		return nil, errors.New("the test ended")
	}})
	_, cancel, done := startReturning(t, mgr)
	g.Eventually(building).WithTimeout(time.Minute).Should(Receive())

	stopped := time.Now()
	cancel()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	// A hung runnable holds the stop for the grace period, 30 s.
	g.Expect(time.Since(stopped)).To(BeNumerically("<", 10*time.Second), "the stop waited for the build")
}

// A cache whose informers do not stop with the manager's context (one
// whose list a just-restarted API server holds, its watch cache still
// initializing, stops only when the server answers) does not hold the
// stop: the exit after a change seen as the API returns waited up to 1.2 s
// for it in make bench. Here the cache's Start outlives its context until
// the test ends.
func TestGuardStopsWhileItsCacheHangsInItsStop(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{NewCache: func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
		built, err := cache.New(cfg, o)
		return slowStop{Cache: built, hang: hang}, err
	}})
	ctx, cancel, done := startReturning(t, mgr)
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	stopped := time.Now()
	cancel()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	// A hung runnable holds the stop for the grace period, 30 s.
	g.Expect(time.Since(stopped)).To(BeNumerically("<", 10*time.Second), "the stop waited for the cache")
}

// slowStop is a cache whose Start returns only when hang closes.
type slowStop struct {
	cache.Cache
	hang <-chan struct{}
}

func (s slowStop) Start(ctx context.Context) error {
	err := s.Cache.Start(ctx)
	<-s.hang
	return err
}

// startReturning starts mgr; done receives what its Start returned. The
// test cancels ctx to stop it (and the test's end does).
func startReturning(t *testing.T, mgr manager.Manager) (context.Context, context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return ctx, cancel, done
}

// freezingProxy forwards TCP connections to an API server until frozen;
// then it forwards nothing, as a frozen API server or a dead link answers.
type freezingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen chan struct{}
	conns  []net.Conn
}

func newFreezingProxy(t *testing.T, host string) *freezingProxy {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, target: u.Host, frozen: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *freezingProxy) addr() string { return p.ln.Addr().String() }

func (p *freezingProxy) freeze() { close(p.frozen) }

func (p *freezingProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies until frozen; frozen, it reads and drops.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			_ = dst.Close()
			return
		}
		select {
		case <-p.frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			_ = src.Close()
			return
		}
	}
}

func (p *freezingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
