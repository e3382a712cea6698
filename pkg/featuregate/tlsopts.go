package featuregate

import (
	"crypto/tls"
	"errors"
)

var (
	errTLSNotRead    = errors.New("featuregate: no TLS security profile read yet; no handshake until it is")
	errTLSNotOptedIn = errors.New("featuregate: Guard.TLSOpts used without featuregate.Options.TLSProfile; no profile is read, so none is served")
)

// TLSOpts serves TLS with the snapshot's TLS security profile: pass it,
// last, in the TLSOpts of controller-runtime's metrics server and webhook
// server options. Servers start before the snapshot is taken (the probes
// and webhooks must answer), so every handshake fails until the profile is
// read; none is ever negotiated under an assumed profile. After that each
// handshake gets the server's configuration with the profile's minimum
// version, cipher suites and groups, when the profile is honoured (see
// TLSProfile.Honored), and as it was given otherwise. It needs
// Options.TLSProfile; without it every handshake fails, saying so. A
// profile that changes stops the manager: the process serves the profile it
// read until it exits.
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
		if !ok || s.tls == nil {
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
		s.tls.apply(c)
		return c, nil
	}
}
