package featuregate

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TLSProfile is the cluster's TLS security profile as a component serves
// it, resolved at start from the APIServer's spec.tlsSecurityProfile and
// spec.tlsAdherence (see Options.TLSProfile). It is a value: Snapshot
// returns a copy.
//
// What is served is what crypto/tls makes of the profile, and only a change
// of that restarts: whether the profile is honoured, the minimum version,
// the set of TLS 1.0–1.2 suites (below a TLS 1.3 minimum only) and the set
// of groups. A profile's name, the order of its ciphers or groups (Go
// ignores both), a cipher's OpenSSL or IANA spelling, its ciphers under a
// TLS 1.3 minimum, and names this binary does not know are no change.
//
// A name this binary does not know never widens what is served: it is left
// out (and logged at start), and what is left is served, never Go's
// defaults in its place. Ciphers none of which is a TLS 1.0–1.2 suite this
// Go knows make the minimum TLS 1.3; groups none of which this Go knows
// serve no handshake at all (Guard.TLSOpts refuses each one, naming the
// groups), until a profile names one it knows.
type TLSProfile struct {
	// Type is the profile's type: Old, Intermediate, Modern or Custom.
	// An unset profile is Intermediate, as the API documents it.
	Type configv1.TLSProfileType
	// MinTLSVersion and Ciphers are the profile's, as the API spells them
	// (OpenSSL cipher names). TLS 1.3 suites are not configurable in Go:
	// they are always on when TLS 1.3 is negotiated.
	MinTLSVersion configv1.TLSProtocolVersion
	Ciphers       []string
	// Groups are the key-exchange groups (curves) the profile allows, when
	// the cluster's API carries them (openshift/api's TLSProfileSpec.groups,
	// newer than this library's floor: read from the object itself, and for
	// the predefined profiles from the openshift/api the binary is built
	// with). Empty: Go's defaults.
	Groups []string
	// Adherence is spec.tlsAdherence as read; empty when unset.
	Adherence configv1.TLSAdherencePolicy
	// Honored reports whether the component serves with this profile: when
	// the adherence policy is StrictAllComponents (or a value this library
	// does not know, which OpenShift says to treat as strict), or always
	// for a component that Options.TLSProfile.LegacyAdhering says honoured
	// the profile before the policy existed. When false, Guard.TLSOpts
	// leaves the server's own TLS settings as they are.
	Honored bool
	// From names what it was read from: the APIServer, or the fallback
	// Options.TLSProfile.Absent when the cluster has none.
	From string
}

// String is the profile as logged.
func (p TLSProfile) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (minTLSVersion %s", p.Type, p.MinTLSVersion)
	if len(p.Ciphers) > 0 {
		fmt.Fprintf(&b, ", ciphers %s", strings.Join(p.Ciphers, ","))
	}
	if len(p.Groups) > 0 {
		fmt.Fprintf(&b, ", groups %s", strings.Join(p.Groups, ","))
	}
	adherence := string(p.Adherence)
	if adherence == "" {
		adherence = "unset"
	}
	fmt.Fprintf(&b, "; adherence %s, ", adherence)
	if p.Honored {
		b.WriteString("honored)")
	} else {
		b.WriteString("not honored: the server's own TLS settings)")
	}
	return b.String()
}

// clone is p with slices of its own.
func (p TLSProfile) clone() TLSProfile {
	p.Ciphers = slices.Clone(p.Ciphers)
	p.Groups = slices.Clone(p.Groups)
	return p
}

// tlsDiff lists, as sentences, what differs between the startup profile
// and a live one in what the component serves: whether it honours the
// profile, and, when it does, the settings crypto/tls serves with (see
// tlsSettings), so that only a change a client can tell restarts. The
// sentences name the profile's fields; the minimum version is the one
// served. The profile's type is a name only: Custom with Intermediate's
// settings is no change. Two profiles that both serve no handshake (no
// group this Go knows) serve the same: nothing.
func tlsDiff(startup, live TLSProfile) []string {
	if startup.Honored != live.Honored {
		return []string{fmt.Sprintf("TLS profile honored %t → %t (adherence %q → %q)", startup.Honored, live.Honored, startup.Adherence, live.Adherence)}
	}
	if !startup.Honored {
		return nil
	}
	was, is := startup.settings(), live.settings()
	if was.refused != nil && is.refused != nil {
		return nil
	}
	profiles := fmt.Sprintf("(profile %s → %s)", startup.Type, live.Type)
	var out []string
	if was.minVersion != is.minVersion {
		out = append(out, fmt.Sprintf("minTLSVersion %s → %s %s", versionName(was.minVersion), versionName(is.minVersion), profiles))
	}
	if was.minVersion < tls.VersionTLS13 && is.minVersion < tls.VersionTLS13 && !slices.Equal(was.suites, is.suites) {
		out = append(out, fmt.Sprintf("ciphers %v → %v %s", startup.Ciphers, live.Ciphers, profiles))
	}
	if (was.refused == nil) != (is.refused == nil) || !slices.Equal(was.curves, is.curves) {
		out = append(out, fmt.Sprintf("groups %v → %v %s", startup.Groups, live.Groups, profiles))
	}
	return out
}

// resolveTLSProfile resolves an APIServer, as its JSON (an unstructured
// object: groups may be newer than the library's openshift/api), into the
// profile it asks for. Bad input is an error naming the field.
func resolveTLSProfile(obj map[string]any, legacyAdhering bool) (TLSProfile, error) {
	var as configv1.APIServer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &as); err != nil {
		return TLSProfile{}, fmt.Errorf("decode APIServer: %w", err)
	}
	name := "APIServer " + as.Name
	p, err := profileSpec(as.Spec.TLSSecurityProfile, obj, name)
	if err != nil {
		return TLSProfile{}, err
	}
	p.Adherence = as.Spec.TLSAdherence
	p.Honored = legacyAdhering || honorsClusterProfile(p.Adherence)
	p.From = name
	return p, nil
}

// profileSpec resolves spec.tlsSecurityProfile; raw is the object it came
// from (nil for a fallback given in Options), for the groups.
func profileSpec(sp *configv1.TLSSecurityProfile, raw map[string]any, object string) (TLSProfile, error) {
	typ := configv1.TLSProfileIntermediateType
	if sp != nil && sp.Type != "" {
		typ = sp.Type
	}
	var spec configv1.TLSProfileSpec
	field := "spec.tlsSecurityProfile"
	switch typ {
	case configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType:
		spec = *configv1.TLSProfiles[typ]
	case configv1.TLSProfileCustomType:
		if sp.Custom == nil {
			return TLSProfile{}, fmt.Errorf("%s: %s.custom is required when type is Custom", object, field)
		}
		spec = sp.Custom.TLSProfileSpec
	default:
		return TLSProfile{}, fmt.Errorf("%s: %s.type %q is not a profile this library knows (Old, Intermediate, Modern, Custom)", object, field, typ)
	}
	if _, ok := tlsVersions[spec.MinTLSVersion]; !ok {
		return TLSProfile{}, fmt.Errorf("%s: %s minTLSVersion %q is not a TLS version (VersionTLS10 to VersionTLS13)", object, field, spec.MinTLSVersion)
	}
	p := TLSProfile{Type: typ, MinTLSVersion: spec.MinTLSVersion, Ciphers: slices.Clone(spec.Ciphers)}
	// The groups: the object's own when it names them (a Custom profile),
	// else those openshift/api defines for a predefined profile, when the
	// openshift/api this binary is built with has them.
	if raw != nil {
		if groups, ok, _ := unstructured.NestedStringSlice(raw, "spec", "tlsSecurityProfile", strings.ToLower(string(typ)), "groups"); ok {
			p.Groups = groups
			return p, nil
		}
	}
	if typ != configv1.TLSProfileCustomType {
		p.Groups = groupsOf(configv1.TLSProfiles[typ])
	}
	return p, nil
}

// groupsOf reads TLSProfileSpec.Groups where the openshift/api this binary
// is built with has it: naming the field would raise the library's floor.
func groupsOf(spec *configv1.TLSProfileSpec) []string {
	f := reflect.ValueOf(spec).Elem().FieldByName("Groups")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return nil
	}
	out := make([]string, 0, f.Len())
	for i := range f.Len() {
		if e := f.Index(i); e.Kind() == reflect.String {
			out = append(out, e.String())
		}
	}
	return out
}

// honorsClusterProfile is OpenShift's rule for components that did not
// honour the profile before spec.tlsAdherence existed: only under
// StrictAllComponents, or a value this library does not know (the API says
// to treat it as strict).
func honorsClusterProfile(a configv1.TLSAdherencePolicy) bool {
	switch a {
	case configv1.TLSAdherencePolicyNoOpinion, configv1.TLSAdherencePolicyLegacyAdheringComponentsOnly:
		return false
	default:
		return true
	}
}

var tlsVersions = map[configv1.TLSProtocolVersion]uint16{
	configv1.VersionTLS10: tls.VersionTLS10,
	configv1.VersionTLS11: tls.VersionTLS11,
	configv1.VersionTLS12: tls.VersionTLS12,
	configv1.VersionTLS13: tls.VersionTLS13,
}

// openSSLCiphers names, in IANA's spelling, the suites the API names in
// OpenSSL's. The TLS 1.3 suites are left out: Go does not configure them.
var openSSLCiphers = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA256":     "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-RSA-AES128-SHA256":       "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-DES-CBC3-SHA":        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
	"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
	"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
	"AES128-SHA256":                 "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
	"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	"DES-CBC3-SHA":                  "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
}

// tls13Suites are the names of the TLS 1.3 suites, on whenever TLS 1.3 is.
var tls13Suites = map[string]bool{"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true}

// tlsGroups maps the API's group names to Go's curve IDs, by number: the
// post-quantum hybrids are newer than the library's Go floor, and are used
// only when the Go the binary is built with knows them.
var tlsGroups = map[string]tls.CurveID{
	"X25519":             tls.X25519,
	"secp256r1":          tls.CurveP256,
	"secp384r1":          tls.CurveP384,
	"secp521r1":          tls.CurveP521,
	"X25519MLKEM768":     tls.CurveID(0x11ec),
	"SecP256r1MLKEM768":  tls.CurveID(0x11eb),
	"SecP384r1MLKEM1024": tls.CurveID(0x11ed),
}

// goKnows reports whether this binary's crypto/tls implements id: its
// String names the curves it knows and numbers the others.
func goKnows(id tls.CurveID) bool { return !strings.HasPrefix(id.String(), "CurveID(") }

// tlsSettings are what a server serves with under a profile, as crypto/tls
// takes them: the one value apply (what is served) and tlsDiff (what
// restarts) both read, so that the two cannot disagree. Names are
// resolved to IDs, and what crypto/tls ignores is left out.
type tlsSettings struct {
	// minVersion is the profile's minimum, or TLS 1.3 when the profile
	// names ciphers and none of them is a TLS 1.0–1.2 suite this Go knows:
	// no CipherSuites would be Go's defaults, more than the profile allows.
	minVersion uint16
	// suites are the TLS 1.0–1.2 suites, as a sorted set; nil under a TLS
	// 1.3 minimum (crypto/tls configures no TLS 1.3 suite) and when the
	// profile names none (Go's defaults).
	suites []uint16
	// curves are the groups, as a sorted set; nil when the profile names
	// none (Go's defaults), or none this Go knows (then refused is set).
	curves []tls.CurveID
	// refused, when the profile names groups and this Go knows none of
	// them, says why no handshake is served: no CurvePreferences would be
	// Go's default groups, more than the profile allows.
	refused error
	// skipped names what the profile names and this binary cannot serve,
	// to be logged once, at start.
	skipped []string
}

// cipherSuiteIDs maps the IANA names of the suites this Go implements to
// their IDs, built once: apply runs at every handshake.
var cipherSuiteIDs = sync.OnceValue(func() map[string]uint16 {
	ids := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		ids[cs.Name] = cs.ID
	}
	return ids
})

// settings resolves the profile into what crypto/tls serves with (see
// tlsSettings), whether or not it is honoured.
func (p TLSProfile) settings() tlsSettings {
	suites, skipped := p.suiteIDs()
	curves, skippedGroups := p.curveIDs()
	s := tlsSettings{minVersion: tlsVersions[p.MinTLSVersion], curves: curves, skipped: append(skipped, skippedGroups...)}
	if len(p.Ciphers) > 0 && len(suites) == 0 {
		s.minVersion = tls.VersionTLS13
	}
	if s.minVersion < tls.VersionTLS13 {
		s.suites = suites
	}
	if len(p.Groups) > 0 && len(curves) == 0 {
		s.refused = fmt.Errorf("%w (groups %s)", errTLSNoKnownGroup, strings.Join(p.Groups, ", "))
	}
	return s
}

// suiteIDs resolves the profile's ciphers, in OpenSSL's spelling or IANA's,
// into the set of TLS 1.0–1.2 suites this Go implements, and the names it
// does not know. TLS 1.3's suites are neither: they are on with TLS 1.3.
func (p TLSProfile) suiteIDs() (ids []uint16, unknown []string) {
	known := cipherSuiteIDs()
	for _, name := range p.Ciphers {
		iana := name
		if n, ok := openSSLCiphers[name]; ok {
			iana = n
		}
		switch id, ok := known[iana]; {
		case tls13Suites[iana]:
		case ok:
			ids = append(ids, id)
		default:
			unknown = append(unknown, "cipher "+name)
		}
	}
	return sortedSet(ids), unknown
}

// curveIDs resolves the profile's groups into the set of curves this Go
// implements, and the names it does not know.
func (p TLSProfile) curveIDs() (ids []tls.CurveID, unknown []string) {
	for _, g := range p.Groups {
		if id, ok := tlsGroups[g]; ok && goKnows(id) {
			ids = append(ids, id)
		} else {
			unknown = append(unknown, "group "+g)
		}
	}
	return sortedSet(ids), unknown
}

// sortedSet is ids sorted, without repeats: the order of a list is no
// setting, since crypto/tls ignores it in both lists a profile sets. Its
// Config.CipherSuites doc says "The order of the list is ignored" (Go
// 1.17 on, golang.org/issue/45430: the server picks by its
// cipherSuitesPreferenceOrder, cipher_suites.go), and its
// Config.CurvePreferences doc says the same (Go 1.24 on,
// golang.org/issue/69393: Config.curvePreferences, common.go, keeps
// defaultCurvePreferences' order and only filters it by the list). The
// library's floor is Go 1.25; TestTLSDiffMatchesHandshakes checks it
// against the Go the tests are built with.
func sortedSet[T cmp.Ordered](ids []T) []T {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// versionName is the API's name of a TLS version, as the sentences of
// tlsDiff spell it.
func versionName(v uint16) configv1.TLSProtocolVersion {
	for name, id := range tlsVersions {
		if id == v {
			return name
		}
	}
	return configv1.TLSProtocolVersion(tls.VersionName(v))
}

// apply sets cfg to serve with the profile, when it is honoured; an error
// when it serves no handshake (see tlsSettings.refused).
func (p TLSProfile) apply(cfg *tls.Config) error {
	if !p.Honored {
		return nil
	}
	s := p.settings()
	if s.refused != nil {
		return s.refused
	}
	cfg.MinVersion = s.minVersion
	// Under a TLS 1.3 minimum the suites play no part: the server's own
	// are left as they are.
	if s.minVersion < tls.VersionTLS13 {
		cfg.CipherSuites = s.suites
	}
	if len(s.curves) > 0 {
		cfg.CurvePreferences = s.curves
	}
	return nil
}
