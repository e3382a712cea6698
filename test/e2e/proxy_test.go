package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards loopback TCP connections to a target, and can cut them:
// a broken watch without a stopped server, the way a flaky network or a
// load balancer breaks it. TLS passes through untouched, so the client still
// verifies the API server's certificate (issued for 127.0.0.1).
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// accepted counts connections forwarded, refused those closed at once.
	accepted, refused int
	wg                sync.WaitGroup
}

// startProxy listens on 127.0.0.1:0 and forwards to target (host:port); it
// is closed when t ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every live connection and refuses new ones until Restore.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore forwards new connections again.
func (p *tcpProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Counts returns how many connections were forwarded and refused so far.
func (p *tcpProxy) Counts() (accepted, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.refused
}

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.mu.Lock()
		if p.cut {
			p.refused++
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.accepted++
		p.mu.Unlock()
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track registers a connection pair, unless a Cut came in meanwhile.
func (p *tcpProxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	p.conns[in] = struct{}{}
	p.conns[out] = struct{}{}
	return true
}

// pipe copies one way; when either side ends, both are closed.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
