package featuregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
)

// A guard with Options.TLSProfile reads the APIServer too.
// +kubebuilder:rbac:groups=config.openshift.io,resources=apiservers,verbs=get;list;watch

// TLSProfileOptions opt a guard into the cluster's TLS security profile
// (see Options.TLSProfile); zero values are the defaults.
type TLSProfileOptions struct {
	// APIServer is the name of the APIServer to read ("cluster").
	APIServer string
	// LegacyAdhering is for a component that honoured the cluster's TLS
	// profile before spec.tlsAdherence existed: it honours the profile
	// whatever the policy. Any other component honours it only under
	// StrictAllComponents (or a policy value the library does not know,
	// which OpenShift says to treat as strict), and otherwise keeps the
	// TLS settings its servers were given.
	LegacyAdhering bool
	// Absent is the profile to serve when the cluster has no APIServer of
	// that name, or serves no APIServer API (MicroShift, plain
	// Kubernetes). Nil: the guard waits for one, not ready, and
	// /readyz/featuregate says why. Never a silent default: the snapshot's
	// TLSProfile.From names the fallback, and an APIServer that appears
	// later with another profile stops the manager.
	Absent *configv1.TLSSecurityProfile
}

// tlsPart is the TLS security profile as a part of the snapshot
// (Options.TLSProfile): it reads the APIServer live, on connections of its
// own (an ownClient: health-checked at the freshness bound,
// renewed after a lapse), resolves its profile, and compares a live one
// with the snapshot's, asking for the stop when they differ in what the
// component serves with. Under a manager a controller on the manager's
// cache watches it (tlscontroller.go); Guard.TLSOpts serves it.
type tlsPart struct {
	api    *ownClient
	name   string
	legacy bool
	absent *configv1.TLSSecurityProfile
	// notServed is set when a read found no APIServer API: the controller
	// that watches it is not started then (its informer could not sync).
	notServed atomic.Bool

	stopper *stopper
	events  eventWriter
	metrics metrics
	log     logr.Logger

	// unreadable is the last reason a live profile could not be served.
	unreadable lastReason
}

// tlsKey is the TLS profile's place in a Snapshot.
var tlsKey = &partKey{label: "TLS profile"}

// newTLSPart validates o (Options.TLSProfile) and reads through api.
func newTLSPart(api *ownClient, o TLSProfileOptions, opts Options, stop *stopper, events eventWriter, m metrics) (*tlsPart, error) {
	if o.APIServer == "" {
		o.APIServer = defaultName
	}
	if o.Absent != nil {
		if _, err := profileSpec(o.Absent, nil, "featuregate.Options.TLSProfile.Absent"); err != nil {
			return nil, err
		}
	}
	return &tlsPart{api: api, name: o.APIServer, legacy: o.LegacyAdhering, absent: o.Absent,
		stopper: stop, events: events, metrics: m, log: opts.Logger}, nil
}

func (t *tlsPart) key() *partKey  { return tlsKey }
func (t *tlsPart) what() string   { return "TLS security profile" }
func (t *tlsPart) object() string { return "APIServer " + t.name }

func (t *tlsPart) reconnect() { t.api.reconnect() }

// unreadLine is the startup's retry line while the profile is not read.
func (t *tlsPart) unreadLine() string {
	return "TLS security profile not read; no profile assumed, retrying"
}

// needsManager: Guard.TLSOpts serves the profile in a manager's servers.
func (t *tlsPart) needsManager() string {
	return "Options.TLSProfile: serving the profile needs NewManager"
}

// reasonTLSProfileChanged is the Event on the APIServer whose profile
// changed.
const reasonTLSProfileChanged = "TLSProfileChanged"

// take is the profile the snapshot holds.
func (t *tlsPart) take(ctx context.Context) (any, error) {
	p, err := t.read(ctx)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// follow is the manager's controller's (tlscontroller.go): the monitor
// has nothing to follow, and the prover's reads prove the profile.
func (t *tlsPart) follow(ctx context.Context, _ any, following func()) (bool, error) {
	following()
	<-ctx.Done()
	return false, nil
}

// noteTaken says, at start, what of the profile this binary cannot serve.
func (t *tlsPart) noteTaken(log logr.Logger, value any) {
	p, ok := value.(TLSProfile)
	if !ok || !p.Honored {
		return
	}
	switch served := p.settings(); {
	case served.refused != nil:
		log.Error(served.refused, "TLS profile names no group this binary knows; every handshake refused", "skipped", served.skipped,
			"tlsProfile", p.String())
	case len(served.skipped) > 0:
		log.Info("TLS profile names what this binary cannot serve; serving without it", "skipped", served.skipped,
			"tlsProfile", p.String())
	}
}

// TLSProfile is the cluster's TLS security profile read with the
// FeatureGate, when Options.TLSProfile asked for it; false otherwise.
func (s Snapshot) TLSProfile() (TLSProfile, bool) {
	p := s.tlsProfile()
	if p == nil {
		return TLSProfile{}, false
	}
	return p.clone(), true
}

// tlsProfile is the snapshot's profile, nil without one.
func (s Snapshot) tlsProfile() *TLSProfile {
	v, ok := s.valueOf(tlsKey)
	if !ok {
		return nil
	}
	p := v.(TLSProfile)
	return &p
}

// profileError is an APIServer the API answered for, whose profile cannot
// be served: bad input, or none and no fallback. A running guard keeps its
// snapshot then (a new process could not read one either); at start it is
// a reason to wait.
type profileError struct{ err error }

func (e *profileError) Error() string { return e.err.Error() }
func (e *profileError) Unwrap() error { return e.err }

// read reads the APIServer once, bounded by ctx, and resolves its profile.
// Its JSON, not a typed object: the groups may be newer than the library's
// openshift/api.
func (t *tlsPart) read(ctx context.Context) (TLSProfile, error) {
	res := t.api.client().Get().Resource("apiservers").Name(t.name).MaxRetries(0).Do(ctx)
	// Error, not Raw's error: it reads the Status the API answered with,
	// which tells an absent object from an absent API.
	if err := res.Error(); err != nil {
		err = describeReadErrorOf("APIServer", t.name, err)
		var notServed *notServedError
		switch {
		case errors.As(err, &notServed):
			t.notServed.Store(true)
			return t.whenAbsent(err)
		case errors.Is(err, errNotFound):
			t.notServed.Store(false)
			return t.whenAbsent(err)
		}
		return TLSProfile{}, err
	}
	t.notServed.Store(false)
	raw, _ := res.Raw()
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return TLSProfile{}, fmt.Errorf("decode APIServer %s: %w", t.name, err)
	}
	return t.resolve(obj)
}

// resolve resolves an APIServer read from the API or the cache.
func (t *tlsPart) resolve(obj map[string]any) (TLSProfile, error) {
	p, err := resolveTLSProfile(obj, t.legacy)
	if err != nil {
		return TLSProfile{}, &profileError{err}
	}
	return p, nil
}

// whenAbsent is the fallback profile, or the reason to wait for one.
func (t *tlsPart) whenAbsent(why error) (TLSProfile, error) {
	if t.absent == nil {
		return TLSProfile{}, &profileError{fmt.Errorf("%w, and featuregate.Options.TLSProfile.Absent names no fallback profile: waiting for it", why)}
	}
	p, err := profileSpec(t.absent, nil, "featuregate.Options.TLSProfile.Absent")
	if err != nil {
		return TLSProfile{}, &profileError{err} // validated by NewGuard: cannot happen
	}
	// The adopter chose it for this case: it is served whatever a policy
	// would say, as there is none.
	p.Honored = true
	p.From = "featuregate.Options.TLSProfile.Absent (" + why.Error() + ")"
	return p, nil
}

// compare compares live (or the reason it cannot be served, err) with the
// snapshot's profile, and reports whether the stop is requested.
func (c *tlsPart) compare(ctx context.Context, held TLSProfile, live TLSProfile, err error, detectedBy string) bool {
	if err != nil {
		if c.unreadable.changed(err.Error()) {
			c.log.Info("APIServer's TLS profile cannot be served; keeping the startup profile", "apiServer", c.name,
				"detectedBy", detectedBy, "reason", err.Error(), "startupTLSProfile", held.String())
		}
		return false
	}
	c.unreadable.changed("")
	d := tlsDiff(held, live)
	if len(d) == 0 {
		return false
	}
	reason := fmt.Sprintf("APIServer %s TLS profile changed: %v", c.name, d)
	if !c.stopper.Stop(reason, nil) {
		return true // reported by whoever saw it first
	}
	c.log.Info("TLS security profile changed; requesting shutdown", "apiServer", c.name, "diff", d, "detectedBy", detectedBy,
		"startupTLSProfile", held.String(), "liveTLSProfile", live.String())
	ref := &corev1.ObjectReference{APIVersion: configv1.GroupVersion.String(), Kind: "APIServer", Name: c.name}
	c.events.record(ctx, ref, corev1.EventTypeWarning, reasonTLSProfileChanged, "Compare", reason+"; requesting shutdown")
	c.metrics.shutdownRequests.Inc()
	return true
}

// check is the prover's read, and the monitor's after each FeatureGate
// read. An answer that cannot be served is an answer (the snapshot is
// kept, as compare says); only no answer is no proof.
func (t *tlsPart) check(ctx context.Context, held any, detectedBy string) (bool, error) {
	live, err := t.read(ctx)
	var bad *profileError
	if err != nil && !errors.As(err, &bad) {
		if ctx.Err() != nil {
			return false, fmt.Errorf("%w to a consistent read of APIServer %s: %w", errNoAnswer, t.name, ctx.Err())
		}
		return false, err
	}
	return t.compare(ctx, held.(TLSProfile), live, err, detectedBy), nil
}
