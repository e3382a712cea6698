package harness

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReasonCheck is the operator's readiness check whose body says why it is
// not ready.
const ReasonCheck = "featuregate"

// probeClient opens a connection per probe: no kept-alive connection to a
// process that has gone, its port now someone else's.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// readyz GETs /readyz, or /readyz/<check>, on the health probe address.
func (p *Process) readyz(ctx context.Context, check string) (int, string, error) {
	path := "/readyz"
	if check != "" {
		path += "/" + check
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Probe+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Readyz GETs /readyz (check "") or /readyz/<check>: status code and body.
func (p *Process) Readyz(check string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.readyz(ctx, check)
}

// Ready reports whether /readyz answers 200.
func (p *Process) Ready() bool {
	code, _, err := p.Readyz("")
	return err == nil && code == http.StatusOK
}

// ReadyzStatus is /readyz's status code, 0 when it does not answer.
func (p *Process) ReadyzStatus() int {
	code, _, _ := p.Readyz("")
	return code
}

// ReadyzReason is the body of the ReasonCheck; "" when it does not answer.
func (p *Process) ReadyzReason() string {
	_, body, _ := p.Readyz(ReasonCheck)
	return body
}

// WaitReady polls /readyz every interval and returns the time of the first
// 200. It fails when the process exits first or ctx ends.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration) (time.Time, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		// A probe stuck on a loaded machine must not hide a later answer.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		code, _, err := p.readyz(pctx, "")
		cancel()
		if err == nil && code == http.StatusOK {
			return time.Now(), nil
		}
		if p.Exited() {
			return time.Time{}, fmt.Errorf("%s exited (%s) before it was ready%s", p.Name, p.exitStatus(), p.seeLog())
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: waiting for /readyz: %w%s", p.Name, ctx.Err(), p.seeLog())
		case <-t.C:
		}
	}
}

// ReadyWithin is WaitReady for tests: up to timeout, polling every 250 ms.
func (p *Process) ReadyWithin(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := p.WaitReady(ctx, 250*time.Millisecond)
	return err
}

// FreePort is a loopback TCP port nobody listened on a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RebindPort is a free loopback port for a server that binds it again and
// again (a supervised process restarted many times on one address). It is
// chosen below the kernel's ephemeral range (ip_local_port_range), which
// FreePort's ports and every connection's source port come from: one of
// the hundreds of connections a campaign opens would otherwise take the
// port between two lives, and the next life fail with "address already in
// use". Only another explicit choice can take it.
func RebindPort() (int, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const from = 10000
	if low <= from+1000 {
		return FreePort() // a range that leaves nothing below it
	}
	for range 100 {
		port := from + rand.IntN(low-from)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in 127.0.0.1:%d-%d after 100 tries", from, low-1)
}

// ClosedAddr is a loopback address nothing listens on: an API server that
// is down. A port below 1024 is never handed out by FreePort, so a test
// running beside cannot take it between the choice and the refusal.
const ClosedAddr = "127.0.0.1:1"

// FreeAddr is FreePort as a 127.0.0.1:port address.
func FreeAddr(tb TB) string {
	tb.Helper()
	port, err := FreePort()
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Wait waits d, or less if ctx ends (its error then): for a pace that is
// itself the scenario or the measurement (a fault held so long, an idle
// window, the gap between two writes), never in place of polling for an
// outcome.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
