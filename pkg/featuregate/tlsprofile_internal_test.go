package featuregate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
)

func apiServerObject(profile map[string]any, adherence string) map[string]any {
	spec := map[string]any{}
	if profile != nil {
		spec["tlsSecurityProfile"] = profile
	}
	if adherence != "" {
		spec["tlsAdherence"] = adherence
	}
	return map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
		"metadata": map[string]any{"name": "cluster"}, "spec": spec}
}

func TestResolveTLSProfile(t *testing.T) {
	intermediate := configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	custom := func(v string, ciphers []any, groups []any) map[string]any {
		c := map[string]any{"minTLSVersion": v, "ciphers": ciphers}
		if groups != nil {
			c["groups"] = groups
		}
		return map[string]any{"type": "Custom", "custom": c}
	}
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		legacy  bool
		want    TLSProfile
		wantErr string
	}{
		{name: "unset is Intermediate, not honoured without a strict policy",
			obj:  apiServerObject(nil, ""),
			want: TLSProfile{Type: "Intermediate", MinTLSVersion: intermediate.MinTLSVersion, Ciphers: intermediate.Ciphers}},
		{name: "a legacy-adhering component honours it whatever the policy",
			obj: apiServerObject(map[string]any{"type": "Modern", "modern": map[string]any{}}, "LegacyAdheringComponentsOnly"), legacy: true,
			want: TLSProfile{Type: "Modern", MinTLSVersion: configv1.VersionTLS13, Ciphers: configv1.TLSProfiles[configv1.TLSProfileModernType].Ciphers,
				Adherence: "LegacyAdheringComponentsOnly", Honored: true}},
		{name: "StrictAllComponents is honoured",
			obj: apiServerObject(map[string]any{"type": "Old", "old": map[string]any{}}, "StrictAllComponents"),
			want: TLSProfile{Type: "Old", MinTLSVersion: configv1.VersionTLS10, Ciphers: configv1.TLSProfiles[configv1.TLSProfileOldType].Ciphers,
				Adherence: "StrictAllComponents", Honored: true}},
		{name: "an unknown policy is treated as strict",
			obj: apiServerObject(nil, "SomethingNewer"),
			want: TLSProfile{Type: "Intermediate", MinTLSVersion: intermediate.MinTLSVersion, Ciphers: intermediate.Ciphers,
				Adherence: "SomethingNewer", Honored: true}},
		{name: "Custom, with the groups newer APIs carry",
			obj: apiServerObject(custom("VersionTLS12", []any{"ECDHE-RSA-AES128-GCM-SHA256"}, []any{"X25519MLKEM768", "X25519"}), "StrictAllComponents"),
			want: TLSProfile{Type: "Custom", MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"ECDHE-RSA-AES128-GCM-SHA256"},
				Groups: []string{"X25519MLKEM768", "X25519"}, Adherence: "StrictAllComponents", Honored: true}},
		{name: "Custom without its spec names the field",
			obj:     apiServerObject(map[string]any{"type": "Custom"}, ""),
			wantErr: "APIServer cluster: spec.tlsSecurityProfile.custom is required when type is Custom"},
		{name: "an unknown type names the field",
			obj:     apiServerObject(map[string]any{"type": "Paranoid"}, ""),
			wantErr: `APIServer cluster: spec.tlsSecurityProfile.type "Paranoid" is not a profile this library knows`},
		{name: "an unknown version names the field",
			obj:     apiServerObject(custom("VersionTLS14", nil, nil), ""),
			wantErr: `spec.tlsSecurityProfile minTLSVersion "VersionTLS14" is not a TLS version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := resolveTLSProfile(tc.obj, tc.legacy)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.want.From = "APIServer cluster"
			if tc.want.Groups == nil {
				// The predefined profiles' groups are the openshift/api's
				// this test is built with: none at the library's floor.
				tc.want.Groups = got.Groups
				if tc.want.Type == "Custom" {
					tc.want.Groups = nil
				}
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// What restarts is what the component serves with: whether it honours the
// profile, and then its settings; a profile's name alone, or anything of a
// profile it does not honour, does not.
func TestTLSDiff(t *testing.T) {
	g := NewWithT(t)
	ciphers := []string{"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384"}
	intermediate := TLSProfile{Type: "Intermediate", MinTLSVersion: configv1.VersionTLS12, Ciphers: ciphers, Honored: true}
	sameAsCustom := intermediate
	sameAsCustom.Type = "Custom"
	g.Expect(tlsDiff(intermediate, sameAsCustom)).To(BeEmpty())

	modern := TLSProfile{Type: "Modern", MinTLSVersion: configv1.VersionTLS13, Ciphers: ciphers, Honored: true}
	g.Expect(tlsDiff(intermediate, modern)).To(ConsistOf(ContainSubstring("minTLSVersion VersionTLS12 → VersionTLS13 (profile Intermediate → Modern)")))

	ignored, ignoredModern := intermediate, modern
	ignored.Honored, ignoredModern.Honored = false, false
	g.Expect(tlsDiff(ignored, ignoredModern)).To(BeEmpty(), "a profile not honoured is not consumed")
	g.Expect(tlsDiff(ignored, intermediate)).To(ConsistOf(ContainSubstring("TLS profile honored false → true")))
}

// servedCase is a change of profile, and the sentence tlsDiff says of it:
// none when what is served stays the same.
type servedCase struct {
	name     string
	from, to TLSProfile
	diff     string
}

// The suites a test server with an ECDSA certificate can serve.
const (
	ecdsaAES128 = "ECDHE-ECDSA-AES128-GCM-SHA256"
	ecdsaAES256 = "ECDHE-ECDSA-AES256-GCM-SHA384"
	ecdsaChaCha = "ECDHE-ECDSA-CHACHA20-POLY1305"
)

// servedCases are the changes of profile that serve the same, and those
// that do not: the restart follows what a handshake gets, not how the
// profile spells it.
func servedCases() []servedCase {
	custom := func(v configv1.TLSProtocolVersion, ciphers []string, groups ...string) TLSProfile {
		return TLSProfile{Type: configv1.TLSProfileCustomType, MinTLSVersion: v, Ciphers: ciphers, Groups: groups, Honored: true}
	}
	const v12, v13 = configv1.VersionTLS12, configv1.VersionTLS13
	tls12 := []string{ecdsaAES128, ecdsaAES256}
	return []servedCase{
		// The same served: no restart.
		{name: "another cipher list under a TLS 1.3 minimum",
			from: custom(v13, []string{"TLS_AES_128_GCM_SHA256", ecdsaAES128}), to: custom(v13, []string{"TLS_AES_256_GCM_SHA384"})},
		{name: "groups reordered",
			from: custom(v12, tls12, "X25519", "secp256r1"), to: custom(v12, tls12, "secp256r1", "X25519")},
		{name: "an OpenSSL cipher name in IANA's spelling",
			from: custom(v12, tls12), to: custom(v12, []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", ecdsaAES256})},
		{name: "ciphers reordered",
			from: custom(v12, []string{ecdsaAES128, ecdsaAES256, ecdsaChaCha}), to: custom(v12, []string{ecdsaChaCha, ecdsaAES256, ecdsaAES128})},
		{name: "TLS 1.2 with no suite below TLS 1.3 is TLS 1.3",
			from: custom(v12, []string{"TLS_AES_128_GCM_SHA256"}), to: custom(v13, nil)},
		{name: "a group this Go does not know dropped",
			from: custom(v12, tls12, "X25519", "brainpoolP256r1"), to: custom(v12, tls12, "X25519")},
		{name: "no group this Go knows, either way: nothing served",
			from: custom(v12, tls12, "brainpoolP256r1"), to: custom(v13, nil, "ffdhe2048")},
		// Something else served: a restart.
		{name: "the minimum version",
			from: custom(v12, tls12), to: custom(v13, tls12), diff: "minTLSVersion VersionTLS12 → VersionTLS13"},
		{name: "the effective minimum: no suite below TLS 1.3 left",
			from: custom(v12, tls12), to: custom(v12, []string{"TLS_AES_128_GCM_SHA256"}), diff: "minTLSVersion VersionTLS12 → VersionTLS13"},
		{name: "a TLS 1.2 suite removed",
			from: custom(v12, tls12), to: custom(v12, []string{ecdsaAES128}),
			diff: "ciphers [" + ecdsaAES128 + " " + ecdsaAES256 + "] → [" + ecdsaAES128 + "]"},
		{name: "a group removed",
			from: custom(v12, tls12, "X25519", "secp256r1"), to: custom(v12, tls12, "X25519"), diff: "groups [X25519 secp256r1] → [X25519]"},
		{name: "Go's default groups to one",
			from: custom(v12, tls12), to: custom(v12, tls12, "X25519"), diff: "groups [] → [X25519]"},
		{name: "no group this Go knows, then one",
			from: custom(v12, tls12, "brainpoolP256r1"), to: custom(v12, tls12, "brainpoolP256r1", "secp384r1"),
			diff: "groups [brainpoolP256r1] → [brainpoolP256r1 secp384r1]"},
	}
}

// tlsDiff compares what is served: a change a handshake cannot tell is no
// restart, and each change it can tell is one sentence, naming the
// profile's fields.
func TestTLSDiffComparesWhatIsServed(t *testing.T) {
	for _, tc := range servedCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := tlsDiff(tc.from, tc.to)
			if tc.diff == "" {
				g.Expect(d).To(BeEmpty())
				g.Expect(tlsDiff(tc.to, tc.from)).To(BeEmpty(), "the other way round")
				return
			}
			g.Expect(d).To(ConsistOf(ContainSubstring(tc.diff)))
			g.Expect(tlsDiff(tc.to, tc.from)).To(HaveLen(1), "the other way round")
		})
	}
}

// The settings Go takes: OpenSSL and IANA names alike, TLS 1.3's suites
// always on and not listed, and what this Go cannot serve left out and
// named.
func TestTLSProfileSettings(t *testing.T) {
	g := NewWithT(t)
	s := TLSProfile{MinTLSVersion: configv1.VersionTLS12, Honored: true,
		Ciphers: []string{"TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-SHA384"},
		Groups:  []string{"X25519", "secp256r1", "brainpool"}}.settings()
	g.Expect(s.minVersion).To(Equal(uint16(tls.VersionTLS12)))
	g.Expect(s.suites).To(Equal([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}))
	g.Expect(s.curves).To(Equal([]tls.CurveID{tls.CurveP256, tls.X25519}), "a set, in ID order: crypto/tls ignores the order")
	g.Expect(s.skipped).To(Equal([]string{"cipher ECDHE-RSA-AES256-SHA384", "group brainpool"}))
	g.Expect(goKnows(tls.CurveID(0xffff))).To(BeFalse())
	g.Expect(goKnows(tls.CurveID(0x11ec))).To(BeTrue(), "X25519MLKEM768 is in Go since 1.24")
}

// Real handshakes against a server configured by Guard.TLSOpts: none before
// the snapshot, then the profile's versions, suites and groups.
func TestTLSOptsHandshakes(t *testing.T) {
	g := NewWithT(t)
	gd := &Guard{startup: &startup{taken: make(chan struct{})}, tls: &tlsPart{}}
	cert := selfSigned(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	gd.TLSOpts(cfg)
	addr := serveTLS(t, cfg)

	g.Expect(handshake(addr, tls.VersionTLS13, 0, 0)).To(MatchError(ContainSubstring("internal error")), "no handshake before the profile is read")

	publish := func(p TLSProfile) {
		gd.startup.snap = &Snapshot{parts: []partValue{{key: tlsKey, value: p}}}
	}
	publish(TLSProfile{Type: "Modern", MinTLSVersion: configv1.VersionTLS13, Honored: true})
	g.Expect(handshake(addr, tls.VersionTLS12, 0, 0)).To(MatchError(ContainSubstring("protocol version")), "Modern refuses TLS 1.2")
	g.Expect(handshake(addr, tls.VersionTLS13, 0, 0)).To(Succeed())

	publish(TLSProfile{Type: "Intermediate", MinTLSVersion: configv1.VersionTLS12, Honored: true,
		Ciphers: []string{"ECDHE-ECDSA-AES128-GCM-SHA256"}, Groups: []string{"secp384r1"}})
	g.Expect(handshake(addr, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, 0)).To(Succeed())
	g.Expect(handshake(addr, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, 0)).To(HaveOccurred(), "a suite the profile leaves out")
	g.Expect(handshake(addr, tls.VersionTLS13, 0, tls.X25519)).To(HaveOccurred(), "a group the profile leaves out")
	g.Expect(handshake(addr, tls.VersionTLS13, 0, tls.CurveP384)).To(Succeed())

	publish(TLSProfile{Type: "Modern", MinTLSVersion: configv1.VersionTLS13, Honored: false})
	g.Expect(handshake(addr, tls.VersionTLS12, 0, 0)).To(Succeed(), "a profile not honoured leaves the server's own settings")

	notOpted := &Guard{startup: gd.startup}
	cfg2 := &tls.Config{Certificates: []tls.Certificate{cert}}
	notOpted.TLSOpts(cfg2)
	_, err := cfg2.GetConfigForClient(&tls.ClientHelloInfo{})
	g.Expect(errors.Is(err, errTLSNotOptedIn)).To(BeTrue())
}

// handshake dials addr offering at most version, and only suite and curve
// when set.
func handshake(addr string, version, suite uint16, curve tls.CurveID) error {
	cfg := &tls.Config{InsecureSkipVerify: true, MaxVersion: version} //nolint:gosec // a test server's self-signed certificate
	if suite != 0 {
		cfg.CipherSuites = []uint16{suite}
	}
	if curve != 0 {
		cfg.CurvePreferences = []tls.CurveID{curve}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	return conn.Close()
}

func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
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
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
