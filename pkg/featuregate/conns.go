package featuregate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Nothing of the guard outlives its manager's Start, connections included.
// Closing idle connections is not enough: a request cancelled while its
// connection was being dialed (the startup read, a reflector's list, when
// the manager stops) leaves the dial running, and net/http pools the
// connection once its TLS handshake is done, after every close, with a read
// loop that lasts until the idle timeout (90 s); and a connection whose
// cancelled stream a frozen server never acknowledges is never idle. So
// every connection the guard's clients dial is kept in a connSet, and Start
// closes them all once the manager has drained and the writes still in
// flight have ended (or their budget has); a dial still running then is
// closed as it completes. A request sent after that (the manager's client used
// after Start returned) dials anew, and that connection is its own.

// connSet is the connections dialed through the guard's configs, and the
// requests in flight on its shared transport.
type connSet struct {
	mu    sync.Mutex
	conns map[*setConn]struct{}
	// closes counts closeAll calls: a dial that began before one and ends
	// after it is closed at once.
	closes int
	// inFlight counts the shared transport's writes whose answers are
	// not read to their end or closed yet.
	inFlight int
}

func newConnSet() *connSet { return &connSet{conns: map[*setConn]struct{}{}} }

// configs returns two copies of cfg whose connections s keeps: dialed, for
// a client that builds a transport of its own (the FeatureGate reads, whose
// connection is health-checked at the freshness bound), and shared, for
// every other client of the guard's (its Events, the version marker's read,
// the manager's clients), which share one transport built as client-go
// builds one, with cfg's TLS, as client-go's transport cache would have
// them share the caller's. A cfg with a Transport of its own is the
// caller's to manage: both are copies of it.
func (s *connSet) configs(cfg *rest.Config) (dialed, shared *rest.Config, err error) {
	dialed, shared = rest.CopyConfig(cfg), rest.CopyConfig(cfg)
	if cfg.Transport != nil {
		return dialed, shared, nil
	}
	next := cfg.Dial
	if next == nil {
		// client-go's own dialer (utilnet.SetTransportDefaults).
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	dialed.Dial = s.dial(next)
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS for the guard's clients: %w", err)
	}
	if cfg.ExecProvider != nil {
		// An exec plugin may set a client certificate and a dialer per
		// transport, which client-go refuses beside a Transport: every
		// client dials through dialed then, a transport each.
		return dialed, rest.CopyConfig(dialed), nil
	}
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               cfg.Proxy,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialed.Dial,
		DisableCompression:  cfg.DisableCompression,
	})
	shared.Transport = countedTransport{next: t, set: s}
	// A Transport carries the TLS and the dialer: client-go refuses them
	// beside it.
	shared.TLSClientConfig = rest.TLSClientConfig{}
	shared.Dial, shared.Proxy = nil, nil
	return dialed, shared, nil
}

// dial is next, whose connections s keeps.
func (s *connSet) dial(next func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		s.mu.Lock()
		closes := s.closes
		s.mu.Unlock()
		c, err := next(ctx, network, address)
		if err != nil {
			return nil, err
		}
		sc := &setConn{Conn: c, set: s}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closes != closes {
			_ = c.Close()
			return nil, errDialedWhileClosing
		}
		s.conns[sc] = struct{}{}
		return sc, nil
	}
}

var errDialedWhileClosing = errors.New("featuregate: connection dialed while the manager stopped")

// settle waits until no write is in flight on the shared transport, for at
// most bound: an Event of the manager's recorder or a write of the
// operator's finishes.
func (s *connSet) settle(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for {
		s.mu.Lock()
		n := s.inFlight
		s.mu.Unlock()
		if n == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeAll closes every connection dialed so far, and those being dialed.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closes++
	conns := make([]*setConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (s *connSet) add(d int) {
	s.mu.Lock()
	s.inFlight += d
	s.mu.Unlock()
}

// setConn leaves its set when closed.
type setConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *setConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

// countedTransport counts its writes in flight, until their answer is
// read to its end or closed.
type countedTransport struct {
	next http.RoundTripper
	set  *connSet
}

func (t countedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		// A read acts on nothing: cut it (a watch, a list a restarting
		// API server holds); a write finishes.
		return t.next.RoundTrip(req)
	}
	t.set.add(1)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.set.add(-1)
		return resp, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, set: t.set}
	return resp, nil
}

// WrappedRoundTripper lets client-go see the transport underneath.
func (t countedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

type countedBody struct {
	io.ReadCloser
	set  *connSet
	once sync.Once
}

func (b *countedBody) done() { b.once.Do(func() { b.set.add(-1) }) }

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

func (b *countedBody) Close() error {
	defer b.done()
	return b.ReadCloser.Close()
}
