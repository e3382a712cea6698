package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/featuregate-operator/operator/test/framework/faultproxy"
)

// echo serves lines back, prefixed with name, until the test ends.
func echo(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &conn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and reads the answer within timeout.
func (c *conn) roundTrip(line string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	return c.r.ReadString('\n')
}

func TestHoldKeepsConnectionsOpenAndSilent(t *testing.T) {
	g := NewWithT(t)
	p := faultproxy.Start(t, echo(t, "a"))
	c := dial(t, p.Addr())
	g.Expect(c.roundTrip("1", time.Second)).To(Equal("a:1\n"))

	p.Hold()
	_, err := c.roundTrip("2", 300*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("timeout")), "a held link answers nothing")
	late := dial(t, p.Addr())
	_, err = late.roundTrip("3", 300*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("timeout")), "new connections are held too")

	p.Release()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	g.Expect(c.r.ReadString('\n')).To(Equal("a:2\n"), "the held bytes arrive once released, on the same connection")
	g.Expect(late.roundTrip("4", time.Second)).To(Equal("a:3\n"))
}

func TestDelayAddsLatencyBothWays(t *testing.T) {
	g := NewWithT(t)
	p := faultproxy.Start(t, echo(t, "a"))
	c := dial(t, p.Addr())
	p.Delay(100 * time.Millisecond)
	start := time.Now()
	g.Expect(c.roundTrip("1", 2*time.Second)).To(Equal("a:1\n"))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 200*time.Millisecond))
	p.Delay(0)
	start = time.Now()
	g.Expect(c.roundTrip("2", 2*time.Second)).To(Equal("a:2\n"))
	g.Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond))
}

func TestCutClosesAndRefusesUntilRestored(t *testing.T) {
	g := NewWithT(t)
	p := faultproxy.Start(t, echo(t, "a"))
	c := dial(t, p.Addr())
	g.Expect(c.roundTrip("1", time.Second)).To(Equal("a:1\n"))
	p.Cut()
	_, err := c.roundTrip("2", time.Second)
	g.Expect(err).To(HaveOccurred())
	_, err = dial(t, p.Addr()).roundTrip("3", time.Second)
	g.Expect(err).To(HaveOccurred())
	g.Expect(p.Refused()).To(BeNumerically(">=", 1))
	p.Restore()
	g.Expect(dial(t, p.Addr()).roundTrip("4", time.Second)).To(Equal("a:4\n"))
}

func TestBalancerSendsNewConnectionsToTheFirstTargetUp(t *testing.T) {
	g := NewWithT(t)
	p := faultproxy.Start(t, echo(t, "a"), echo(t, "b"))
	first := dial(t, p.Addr())
	g.Expect(first.roundTrip("1", time.Second)).To(Equal("a:1\n"))
	p.SetDown(0, true)
	g.Expect(dial(t, p.Addr()).roundTrip("2", time.Second)).To(Equal("b:2\n"))
	g.Expect(first.roundTrip("3", time.Second)).To(Equal("a:3\n"), "a live connection stays where it is")
	g.Expect(p.Accepted()).To(Equal([]int{1, 1}))
}

// A proxy made by NewHTTP cuts one client off, by the name it sends, while
// the others pass; RestoreFrom lets it back.
func TestCutFromCutsOneClientOff(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello " + r.Header.Get("X-Client")))
	}))
	t.Cleanup(srv.Close)
	p, err := faultproxy.NewHTTP("x-client", strings.TrimPrefix(srv.URL, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(p.Close)
	get := func(name string, c *http.Client) (string, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.Addr()+"/", nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("X-Client", name)
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	// Each its own keep-alive connection, as etcd's members have.
	a := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	b := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	g.Expect(get("member-a", a)).To(Equal("hello member-a"))
	g.Expect(get("member-b", b)).To(Equal("hello member-b"))

	p.CutFrom("member-a")
	_, err = get("member-a", a)
	g.Expect(err).To(HaveOccurred(), "member-a's live connection closed and a new one refused")
	g.Expect(get("member-b", b)).To(Equal("hello member-b"), "the other client passes, on its live connection")
	g.Expect(get("member-b", &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second})).To(Equal("hello member-b"), "and on a new one")

	p.RestoreFrom("member-a")
	g.Expect(get("member-a", a)).To(Equal("hello member-a"))
}
