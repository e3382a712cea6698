// Package faultproxy is a loopback TCP proxy that injects the network faults
// a client of the control plane must survive, on cue:
//
//   - Cut closes every connection and refuses new ones, as a restarting
//     load balancer or a flaky network does;
//   - Hold forwards no byte in either direction and closes nothing, as a
//     dead link, a blackholing firewall or a hung node does: the client's
//     connections look open and merely quiet;
//   - Delay adds latency to every chunk, in order, in both directions;
//   - with several targets it is a balancer: a new connection goes to the
//     first target not marked Down, as a load balancer whose health check
//     has noticed, or has not yet noticed, a failed backend;
//   - for plain HTTP whose clients name themselves in a header (NewHTTP),
//     CutFrom cuts one client off while the others pass: one etcd member
//     partitioned from its peers.
//
// TLS passes through untouched, so the client still verifies the server's
// certificate. Everything it starts ends when the test does.
package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// TB is what the proxy needs of a test.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Proxy forwards loopback TCP connections to its targets.
type Proxy struct {
	ln      net.Listener
	targets []string

	mu    sync.Mutex
	down  []bool
	cut   bool
	delay time.Duration
	// released is closed while bytes flow; Hold replaces it with an open
	// channel that Release closes.
	released chan struct{}
	// conns maps each live connection to its client's name (the header
	// NewHTTP reads; "" otherwise).
	conns map[net.Conn]string
	// header is what NewHTTP names clients by; cutFrom the names cut off.
	header  string
	cutFrom map[string]bool
	// accepted counts connections forwarded (per target), refused those
	// closed at once.
	accepted []int
	refused  int
	wg       sync.WaitGroup
}

// Start listens on 127.0.0.1:0 and forwards to targets (host:port); it is
// closed when tb ends.
func Start(tb TB, targets ...string) *Proxy {
	tb.Helper()
	p, err := New(targets...)
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// New is Start for a caller that is not a test: it closes the proxy.
func New(targets ...string) (*Proxy, error) {
	if len(targets) == 0 {
		return nil, errors.New("no target")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	released := make(chan struct{})
	close(released)
	p := &Proxy{ln: ln, targets: targets, down: make([]bool, len(targets)), accepted: make([]int, len(targets)),
		released: released, conns: map[net.Conn]string{}, cutFrom: map[string]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// NewHTTP is New for plain HTTP/1 traffic whose clients name themselves in
// header (etcd's members send their peer URLs in X-PeerURLs): it reads each
// connection's first request head to learn its client, so that CutFrom can
// cut that client off. A connection keeps its first request's client, as
// an HTTP/1 connection belongs to the client that opened it.
func NewHTTP(header string, targets ...string) (*Proxy, error) {
	p, err := New(targets...)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.header = textproto.CanonicalMIMEHeaderKey(header)
	p.mu.Unlock()
	return p, nil
}

// CutFrom closes the live connections of every client whose header value,
// a comma-separated list, holds from, and refuses its new ones, until
// RestoreFrom; other clients pass. Only a proxy made by NewHTTP knows its clients.
func (p *Proxy) CutFrom(from string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutFrom[from] = true
	for c, client := range p.conns {
		if p.isCutOff(client) {
			_ = c.Close()
		}
	}
}

// RestoreFrom lets the client CutFrom cut off connect again.
func (p *Proxy) RestoreFrom(from string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.cutFrom, from)
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every live connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore accepts new connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Hold stops every byte, on live connections and new ones, and closes
// nothing, until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
		p.released = make(chan struct{})
	default: // held already
	}
}

// Release lets the held bytes, and all that follow, through.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
	default:
		close(p.released)
	}
}

// Delay delays every chunk by d in each direction from now on; 0 ends it.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetDown marks target i down (no new connection goes to it) or up; live
// connections stay where they are, as a balancer's would.
func (p *Proxy) SetDown(i int, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down[i] = down
}

// Accepted returns how many connections went to each target so far.
func (p *Proxy) Accepted() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.accepted...)
}

// Refused returns how many connections were closed at once, while cut.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.Release()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.wg.Add(1)
		go p.handle(in)
	}
}

// handle forwards one accepted connection, unless the proxy is cut, every
// target is down, or (NewHTTP) its client is cut off.
func (p *Proxy) handle(in net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	header := p.header
	p.mu.Unlock()
	var client string
	if header != "" {
		// Tracked while its head is read, so that Cut and Close end it.
		p.mu.Lock()
		p.conns[in] = ""
		p.mu.Unlock()
		head, name, err := clientOf(in, header)
		p.mu.Lock()
		delete(p.conns, in)
		p.mu.Unlock()
		if err != nil {
			_ = in.Close()
			return
		}
		in, client = head, name
	}
	target, ok := p.pick(client)
	if !ok {
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, out, client) {
		return
	}
	p.wg.Add(2)
	go p.pipe(in, out)
	go p.pipe(out, in)
}

// clientOf reads the head of a connection's first HTTP request for the
// client's name in header; the returned connection replays every byte
// read, then reads on.
func clientOf(in net.Conn, header string) (net.Conn, string, error) {
	_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
	var read bytes.Buffer
	req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(in, &read)))
	if err != nil {
		return in, "", err
	}
	_ = in.SetReadDeadline(time.Time{})
	return &replayConn{Conn: in, r: io.MultiReader(&read, in)}, req.Header.Get(header), nil
}

// replayConn is a connection whose first bytes were read already.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// pick chooses the target of a new connection: the first one up, unless
// the proxy is cut or every target is down.
func (p *Proxy) pick(client string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut && !p.isCutOff(client) {
		for i, down := range p.down {
			if !down {
				p.accepted[i]++
				return p.targets[i], true
			}
		}
	}
	p.refused++
	return "", false
}

// isCutOff tells whether CutFrom cut client off; p.mu is held.
func (p *Proxy) isCutOff(client string) bool {
	for _, name := range strings.Split(client, ",") {
		if name = strings.TrimSpace(name); name != "" && p.cutFrom[name] {
			return true
		}
	}
	return false
}

// track registers a connection pair, unless a Cut or CutFrom came in
// meanwhile.
func (p *Proxy) track(in, out net.Conn, client string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.isCutOff(client) {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	p.conns[in] = client
	p.conns[out] = client
	return true
}

// chunk is bytes read, and when.
type chunk struct {
	data []byte
	at   time.Time
}

// pipe copies src to dst, each chunk no sooner than the delay after it was
// read and never while held; when either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	chunks := make(chan chunk, 64)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{data: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		p.mu.Lock()
		released, delay := p.released, p.delay
		p.mu.Unlock()
		<-released
		if wait := time.Until(c.at.Add(delay)); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	for range chunks { // let the reader end
	}
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
