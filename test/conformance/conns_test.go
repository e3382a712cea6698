package conformance_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// suiteConns is every connection of cfg's transport. The leak specs
// close idle connections once, after Start returned; a connection dialed
// for a request that the stop cancelled is pooled after that close
// (net/http finishes the dial, x/net/http2 adds the connection to its pool
// once its handshake is done) and idles for 90 s. That failed the stock
// manager's "deprecated event broadcaster" spec in about one run of ten at
// controller-runtime v0.23, on this suite's machines. So the suite's
// closeIdleConnections closes every connection of cfg's transport as well:
// what the helper is for ("these'll time out anyway, force it"), made
// whole. Whether the guard closes its own connections when Start returns
// is pkg/featuregate's TestGuardLeavesNothingRunningAfterStart.
var suiteConns = &dialed{conns: map[net.Conn]struct{}{}}

type dialed struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (d *dialed) dial(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

// own gives cfg a transport of its own, with cfg's TLS, dialing through
// d; client-go's defaults (HTTP/2 by x/net, proxy, timeouts) as it would
// set them. A Transport, unlike a Dial func, leaves cfg comparable: the
// spec "should not manipulate the provided config" compares copies.
func (d *dialed) own(cfg *rest.Config) error {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return err
	}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig, DialContext: d.dial})
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}

// closeAll closes every connection dialed so far, in use or not.
func (d *dialed) closeAll() {
	d.mu.Lock()
	conns := d.conns
	d.conns = map[net.Conn]struct{}{}
	d.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}
