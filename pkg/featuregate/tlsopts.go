package featuregate

import (
	"crypto/tls"
	"errors"
)

var (
	errTLSNotRead    = errors.New("featuregate: no TLS security profile read yet; no handshake until it is")
	errTLSNotOptedIn = errors.New("featuregate: Guard.TLSOpts used without featuregate.Options.TLSProfile; no profile is read, so none is served")
	// errTLSNoKnownGroup is wrapped with the profile's groups.
	errTLSNoKnownGroup = errors.New("featuregate: the TLS profile names groups and this binary knows none of them; no handshake rather than Go's default groups")
)

// TLSOpts serves TLS with the snapshot's TLS security profile: pass it,
// last, in the TLSOpts of controller-runtime's metrics server and webhook
// server options. Servers start before the snapshot is taken (the probes
// and webhooks must answer), so every handshake fails until the profile is
// read; none is ever negotiated under an assumed profile. After that each
// handshake gets the server's configuration with the profile's minimum
// version, cipher suites and groups, when the profile is honoured (see
// TLSProfile.Honored), and as it was given otherwise. It needs
// Options.TLSProfile; without it every handshake fails, saying so. An
// honoured profile that names groups, none of which this binary knows,
// fails every handshake too, naming them: Go's default groups would serve
// more than it allows. A profile that changes what is served stops the
// manager: the process serves the profile it read until it exits.
func (g *Guard) TLSOpts(cfg *tls.Config) {
	base := cfg
	// A GetConfigForClient set by an option before this one is kept:
	// its configuration gets the profile.
	prev := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if g.tls == nil {
			return nil, errTLSNotOptedIn
		}
		s, ok := g.startup.Snapshot()
		profile := s.tlsProfile()
		if !ok || profile == nil {
			return nil, errTLSNotRead
		}
		var c *tls.Config
		if prev != nil {
			var err error
			if c, err = prev(hello); err != nil {
				return nil, err
			}
		}
		if c == nil {
			c = base
		}
		// Cloned at each handshake: the server sets its certificate
		// source (controller-runtime's certwatcher) after the options.
		c = c.Clone()
		c.GetConfigForClient = nil
		if err := profile.apply(c); err != nil {
			return nil, err
		}
		return c, nil
	}
}
