package featuregate

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
)

// profileServer is a loopback server configured by Guard.TLSOpts, and the
// profile it serves, which serve changes.
type profileServer struct {
	guard *Guard
	cfg   *tls.Config
	addr  string
}

func newProfileServer(t *testing.T) *profileServer {
	t.Helper()
	gd := &Guard{startup: &startup{taken: make(chan struct{})}, tls: &tlsPart{}}
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	gd.TLSOpts(cfg)
	return &profileServer{guard: gd, cfg: cfg, addr: serveTLS(t, cfg)}
}

// serve makes p the snapshot's profile, for the handshakes that follow.
func (s *profileServer) serve(p TLSProfile) {
	s.guard.startup.mu.Lock()
	defer s.guard.startup.mu.Unlock()
	s.guard.startup.snap = &Snapshot{parts: []partValue{{key: tlsKey, value: p}}}
}

// offer is what a client offers: one version, and the suites and groups
// it allows (nil: Go's defaults).
type offer struct {
	version uint16
	suites  []uint16
	curves  []tls.CurveID
}

func (o offer) String() string {
	return fmt.Sprintf("%s suites %v groups %v", tls.VersionName(o.version), o.suites, o.curves)
}

// offers are the clients that tell the test profiles apart: each version,
// each ECDSA suite alone and all of them (TLS 1.2), each group alone and
// several (in an order of their own, to show the server's is its own).
func offers() []offer {
	suites := [][]uint16{nil,
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, {tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}
	curves := [][]tls.CurveID{nil, {tls.X25519}, {tls.CurveP256}, {tls.CurveP384}, {tls.X25519MLKEM768},
		{tls.CurveP384, tls.CurveP256, tls.X25519}}
	var out []offer
	for _, c := range curves {
		for _, s := range suites {
			out = append(out, offer{version: tls.VersionTLS12, suites: s, curves: c})
		}
		out = append(out, offer{version: tls.VersionTLS13, curves: c})
	}
	return out
}

// negotiate is what a handshake with addr gets under o: the version, suite
// and group, or the error.
func negotiate(addr string, o offer) string {
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: o.version, MaxVersion: o.version, //nolint:gosec // a test server's self-signed certificate
		CipherSuites: o.suites, CurvePreferences: o.curves}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = conn.Close() }()
	cs := conn.ConnectionState()
	return fmt.Sprintf("%s %s %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), cs.CurveID)
}

// served is what each offer gets from s serving p.
func (s *profileServer) served(p TLSProfile) map[string]string {
	s.serve(p)
	out := map[string]string{}
	for _, o := range offers() {
		out[o.String()] = negotiate(s.addr, o)
	}
	return out
}

// The restart follows what a handshake gets, against a real server: two
// profiles tlsDiff finds no difference in get the same from every client
// offer, and two it tells apart differ in at least one. A Go that honoured
// the order of CurvePreferences or CipherSuites would fail "reordered".
func TestTLSDiffMatchesHandshakes(t *testing.T) {
	srv := newProfileServer(t)
	for _, tc := range servedCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			from, to := srv.served(tc.from), srv.served(tc.to)
			var differ []string
			for o, got := range from {
				if to[o] != got {
					differ = append(differ, fmt.Sprintf("%s: %s → %s", o, got, to[o]))
				}
			}
			if tc.diff == "" {
				g.Expect(differ).To(BeEmpty(), "the same served")
			} else {
				g.Expect(differ).NotTo(BeEmpty(), "something else served")
			}
			g.Expect(tlsDiff(tc.from, tc.to)).To(HaveLen(min(len(differ), 1)), "tlsDiff says a change exactly when a handshake can tell; differing offers: %v", differ)
		})
	}
}

// A profile none of whose groups this Go knows serves no handshake (Go's
// default groups would serve more than it allows), says why, and logs it
// at start; one group it knows among them is served alone. A profile not
// honoured leaves the server's own settings, whatever its groups.
func TestTLSOptsRefusesAProfileWithNoKnownGroup(t *testing.T) {
	g := NewWithT(t)
	srv := newProfileServer(t)
	unknown := TLSProfile{Type: configv1.TLSProfileCustomType, MinTLSVersion: configv1.VersionTLS12, Honored: true,
		Ciphers: []string{ecdsaAES128}, Groups: []string{"brainpoolP256r1", "ffdhe2048"}}
	srv.serve(unknown)
	for _, o := range []offer{{version: tls.VersionTLS12}, {version: tls.VersionTLS13}} {
		g.Expect(negotiate(srv.addr, o)).To(ContainSubstring("internal error"), "%s: no handshake", o)
	}
	_, err := srv.cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	g.Expect(err).To(MatchError(And(ContainSubstring("brainpoolP256r1"), ContainSubstring("ffdhe2048"))), "the refusal names the groups")
	g.Expect(unknown.settings().refused).To(HaveOccurred(), "logged at start")
	g.Expect(unknown.settings().skipped).To(ConsistOf("group brainpoolP256r1", "group ffdhe2048"), "named at start")

	oneKnown := unknown
	oneKnown.Groups = []string{"brainpoolP256r1", "secp384r1"}
	srv.serve(oneKnown)
	g.Expect(negotiate(srv.addr, offer{version: tls.VersionTLS13})).To(And(HavePrefix("TLS 1.3 "), HaveSuffix(" CurveP384")))
	g.Expect(negotiate(srv.addr, offer{version: tls.VersionTLS12})).To(Equal("TLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 CurveP384"))
	for _, c := range []tls.CurveID{tls.X25519, tls.CurveP256, tls.X25519MLKEM768} {
		g.Expect(negotiate(srv.addr, offer{version: tls.VersionTLS13, curves: []tls.CurveID{c}})).To(HavePrefix("error: "), "%s is not served", c)
	}

	notHonored := unknown
	notHonored.Honored = false
	srv.serve(notHonored)
	g.Expect(negotiate(srv.addr, offer{version: tls.VersionTLS13})).NotTo(HavePrefix("error: "), "the server's own settings")
}
