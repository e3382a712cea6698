package featuregate

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Nothing of the guard outlives its manager's Start, connections included.
// Closing idle connections is not enough: a request cancelled while its
// connection was being dialed (the startup read, a reflector's list, when
// the manager stops) leaves the dial running, and net/http pools the
// connection once its TLS handshake is done, after every close, with a read
// loop that lasts until the idle timeout (90 s). So every connection the
// guard's transports dial is kept in a connSet, and Start closes them all
// once the manager has drained; a dial still running then is closed as it
// completes.

// connSet is the connections dialed through the guard's configs.
type connSet struct {
	mu    sync.Mutex
	conns map[*setConn]struct{}
	// closes counts closeAll calls: a dial that began before one and ends
	// after it is closed at once.
	closes int
}

func newConnSet() *connSet { return &connSet{conns: map[*setConn]struct{}{}} }

// config is cfg whose connections s keeps; cfg as it is when it brings its
// own Transport (its connections are the caller's).
func (s *connSet) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.Transport != nil {
		return cfg
	}
	next := cfg.Dial
	if next == nil {
		// client-go's own dialer (utilnet.SetTransportDefaults).
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
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
	return cfg
}

var errDialedWhileClosing = errors.New("featuregate: connection dialed while the manager stopped")

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
