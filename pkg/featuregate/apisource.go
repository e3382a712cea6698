package featuregate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// apiSource reads the FeatureGate from the API server, live: a consistent
// list of it by name for a read, and a watch from that list's
// resourceVersion to follow it. Neither retries on its own. client-go
// otherwise retries a request on its own schedule (ten times on a dropped
// connection, and after a 429's Retry-After, which a stopping
// kube-apiserver sets to 5 s), and its reflector backs off for seconds
// before resuming a watch: the guard owns its retries, because a change
// made around an outage must be seen the moment the API answers.
type apiSource struct {
	*ownClient
	name string
	// establish bounds how long a list or watch may take to be answered: a starting
	// kube-apiserver can hold requests for seconds.
	establish time.Duration

	// last is the latest read and the resourceVersion of its list, so
	// that follow from that read watches from there without listing again.
	last atomic.Pointer[listedRead]
}

// listedRead is a FeatureGate as read, and the list it was read in.
type listedRead struct {
	fg *configv1.FeatureGate
	at string
}

// newAPISource reads the FeatureGate name on a client of its own, dialed
// by dial (configDial).
func newAPISource(dial func() (*rest.RESTClient, *http.Transport, error), name string) (*apiSource, error) {
	c, err := newOwnClient(dial)
	if err != nil {
		return nil, err
	}
	return &apiSource{ownClient: c, name: name, establish: 2 * time.Second}, nil
}

// read is a consistent list of the FeatureGate by name rather than a GET.
// It proves as much (the API server answers it once its watch cache has
// caught up with etcd's current revision, or from etcd), costs the servers
// a third less CPU (BENCHMARKS.md, "What one read costs"), and its
// resourceVersion lets follow watch from this very read: a restart costs
// one read and one watch, not a read, a list and a watch.
func (a *apiSource) read(ctx context.Context) (*configv1.FeatureGate, error) {
	list, err := a.list(ctx)
	if err != nil {
		return nil, describeReadError(a.name, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("FeatureGate %s %w", a.name, errNotFound)
	}
	fg := &list.Items[0]
	a.last.Store(&listedRead{fg: fg, at: list.ResourceVersion})
	return fg, nil
}

// list lists the FeatureGate by name, consistently.
func (a *apiSource) list(ctx context.Context) (*configv1.FeatureGateList, error) {
	list := &configv1.FeatureGateList{}
	err := a.client().Get().Resource("featuregates").VersionedParams(&metav1.ListOptions{FieldSelector: a.selector()}, metav1.ParameterCodec).
		MaxRetries(0).Do(ctx).Into(list)
	return list, err
}

func (a *apiSource) selector() string {
	return fields.OneTermEqualSelector("metadata.name", a.name).String()
}

// follow watches the FeatureGate from the list from was read in (up to
// half the freshness bound ago: the startup read), vouching for the view
// from the moment the API server answered the watch. From anything else (a
// FeatureGate read gone, a later read of the prover's in between) it lists
// first and reports the listed object when it is not from. Never from
// from's own resourceVersion, which may be days old: an API server's watch
// cache starts at the revision of its start, and a watch from before it
// fails as "too old". A list's resourceVersion can be too old only after a
// restart in between; the watch then ends at once with that error, and the
// monitor reads again.
func (a *apiSource) follow(ctx context.Context, from *configv1.FeatureGate, following func(), seen func(*configv1.FeatureGate) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var at string
	if last := a.last.Load(); last != nil && last.fg == from {
		at = last.at
	} else {
		listCtx, listed := context.WithTimeout(ctx, a.establish)
		list, err := a.list(listCtx)
		listed()
		if err != nil {
			return fmt.Errorf("list FeatureGate %s: %w", a.name, err)
		}
		for i := range list.Items {
			if fg := &list.Items[i]; fg.ResourceVersion != from.ResourceVersion && seen(fg) {
				return nil
			}
		}
		at = list.ResourceVersion
	}
	w, err := openWatch(ctx, cancel, a.client().Get().Resource("featuregates"), a.selector(), at, a.establish, "FeatureGate "+a.name)
	if err != nil {
		return err
	}
	defer w.Stop()
	following()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return w.ended(ctx)
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if fg, ok := ev.Object.(*configv1.FeatureGate); ok && seen(fg) {
					return nil
				}
			case watch.Error:
				return fmt.Errorf("watch FeatureGate %s: %w", a.name, apierrors.FromObject(ev.Object))
			}
			// Deleted: the FeatureGate controller reports it; the snapshot is
			// all there is, and the watch goes on to see it come back.
		}
	}
}

// namedWatch is a watch of one object by name from a list's
// resourceVersion, as the guard's live reads follow their objects.
type namedWatch struct {
	watch.Interface
	what        string
	established time.Time
	timeout     time.Duration
}

// openWatch sends req (a GET of the object's resource) as such a watch.
// It is abandoned, cancel called, unless answered within establish (a
// starting kube-apiserver can hold requests for seconds); servers end it
// after five to six minutes, jittered so that replicas do not come back
// together. what names the object in its errors.
func openWatch(ctx context.Context, cancel context.CancelFunc, req *rest.Request, selector, at string, establish time.Duration, what string) (*namedWatch, error) {
	timeout := int64(300 + rand.IntN(60))
	answered := time.AfterFunc(establish, cancel)
	w, err := req.VersionedParams(&metav1.ListOptions{
		FieldSelector:       selector,
		ResourceVersion:     at,
		Watch:               true,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	}, metav1.ParameterCodec).MaxRetries(0).Watch(ctx)
	if !answered.Stop() { // the timer cancelled the request
		if w != nil {
			w.Stop()
		}
		return nil, fmt.Errorf("watch %s: not answered within %s", what, establish)
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", what, err)
	}
	return &namedWatch{Interface: w, what: what, established: time.Now(), timeout: time.Duration(timeout) * time.Second}, nil
}

// ended is why its result channel closed: nil once ctx ended or at the
// server's timeout (an ordinary end), an error otherwise.
func (w *namedWatch) ended(ctx context.Context) error {
	if ctx.Err() != nil || time.Since(w.established) >= w.timeout {
		return nil
	}
	return fmt.Errorf("watch %s ended after %s", w.what, time.Since(w.established).Round(time.Millisecond))
}

// errNotFound is an absent object, as the API says it.
var errNotFound = errors.New("not found")

// notServedError is an API the server does not serve (its CRD is not
// installed: MicroShift, plain Kubernetes).
type notServedError struct {
	kind string
	err  error
}

func (e *notServedError) Error() string {
	return fmt.Sprintf("%s API not served (is the config.openshift.io CRD installed?): %v", e.kind, e.err)
}

func (e *notServedError) Unwrap() error { return e.err }

// describeReadError is describeReadErrorOf for the FeatureGate.
func describeReadError(name string, err error) error {
	return describeReadErrorOf("FeatureGate", name, err)
}

// describeReadErrorOf tells an absent object from an absent API: both leave
// us without a snapshot, but they call for different fixes. Without the
// CRD the API server answers a bare "404 page not found", which client-go
// turns into a NotFound marked UnexpectedServerResponse (naming the object
// for a GET; a list names none). A list that finds no object is not an
// error: read says so itself.
func describeReadErrorOf(kind, name string, err error) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse) &&
		errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name == name:
		return fmt.Errorf("%s %s %w", kind, name, errNotFound)
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return &notServedError{kind: kind, err: err}
	default:
		return fmt.Errorf("get %s %s: %w", kind, name, err)
	}
}

// ownClient is a REST client for the guard's own reads (the FeatureGate's
// and each part's), on connections of its own (see ownConnection), renewed
// by reconnect.
type ownClient struct {
	// dial builds a client on connections of its own: one at start, and a
	// new one at each reconnect.
	dial func() (*rest.RESTClient, *http.Transport, error)

	mu sync.Mutex
	rc *rest.RESTClient
	// conns holds rc's connections; nil when the caller's Transport is
	// used.
	conns *http.Transport
}

func newOwnClient(dial func() (*rest.RESTClient, *http.Transport, error)) (*ownClient, error) {
	rc, conns, err := dial()
	if err != nil {
		return nil, err
	}
	return &ownClient{dial: dial, rc: rc, conns: conns}, nil
}

// configDial dials config.openshift.io/v1 clients on own connections.
func configDial(cfg *rest.Config, bound time.Duration) func() (*rest.RESTClient, *http.Transport, error) {
	return func() (*rest.RESTClient, *http.Transport, error) {
		hc, conns, err := ownConnection(cfg, bound)
		if err != nil {
			return nil, nil, err
		}
		rc, err := configClientFor(cfg, hc)
		return rc, conns, err
	}
}

// client is the REST client of the current connections.
func (c *ownClient) client() *rest.RESTClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rc
}

// reconnect moves to a new pool of connections. Closing the old one's idle
// connection is not enough: a connection whose requests were cancelled is
// not idle until the server acknowledges, and a frozen server never does,
// so the next read would wait on it again. The old pool's connections are
// closed once idle, or by their health check.
func (c *ownClient) reconnect() {
	if c.conns == nil {
		return // the caller's Transport: theirs to manage
	}
	rc, conns, err := c.dial()
	if err != nil {
		return // cannot happen: it was built the same way at start
	}
	c.mu.Lock()
	old := c.conns
	c.rc, c.conns = rc, conns
	c.mu.Unlock()
	old.CloseIdleConnections()
}

// ownConnection is an HTTP client for the guard's reads alone, on a
// connection of its own that is health-checked at the freshness bound: a
// dead connection is dropped after two bounds without a frame, and the next
// read dials again (through a balancer, perhaps to another API server).
// client-go's shared connections are checked after 30 s of silence and
// dropped 15 s later, and the manager's traffic on them could keep a
// connection that carries nothing for us looking alive. A caller's own
// Transport is used as it is.
func ownConnection(cfg *rest.Config, bound time.Duration) (*http.Client, *http.Transport, error) {
	if cfg.Transport != nil {
		hc, err := rest.HTTPClientFor(cfg)
		return hc, nil, err
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("transport for the FeatureGate reads: %w", err)
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS for the FeatureGate reads: %w", err)
	}
	dial := (&net.Dialer{Timeout: bound, KeepAlive: 30 * time.Second}).DialContext
	if tc.DialHolder != nil && tc.DialHolder.Dial != nil {
		given := tc.DialHolder.Dial
		dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			return given(ctx, network, address)
		}
	}
	proxy := http.ProxyFromEnvironment
	if tc.Proxy != nil {
		proxy = tc.Proxy
	}
	conns := &http.Transport{
		Proxy:               proxy,
		DialContext:         dial,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: bound,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  tc.DisableCompression,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: bound, PingTimeout: bound},
	}
	rt, err := transport.HTTPWrappersForConfig(tc, conns)
	if err != nil {
		return nil, nil, fmt.Errorf("transport for the FeatureGate reads: %w", err)
	}
	return &http.Client{Transport: rt, Timeout: cfg.Timeout}, conns, nil
}

// configClient reads config.openshift.io/v1 objects live, without retries
// of its own (see apiSource).
func configClient(cfg *rest.Config) (*rest.RESTClient, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("config.openshift.io client: %w", err)
	}
	return configClientFor(cfg, hc)
}

// configClientFor is configClient on the HTTP client hc.
func configClientFor(cfg *rest.Config, hc *http.Client) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &configv1.GroupVersion
	cfg.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("config.openshift.io client: %w", err)
	}
	return rc, nil
}
