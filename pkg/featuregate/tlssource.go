package featuregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// A guard with Options.TLSProfile reads the APIServer too.
// +kubebuilder:rbac:groups=config.openshift.io,resources=apiservers,verbs=get;list;watch

// tlsSource reads the APIServer live, on connections of its own (those of
// an apiSource: health-checked at the freshness bound, renewed after a
// lapse), and resolves its TLS profile.
type tlsSource struct {
	api    *apiSource
	name   string
	legacy bool
	absent *configv1.TLSSecurityProfile
	// notServed is set when a read found no APIServer API: the controller
	// that watches it is not started then (its informer could not sync).
	notServed atomic.Bool
}

func newTLSSource(cfg *rest.Config, o TLSProfileOptions, bound time.Duration) (*tlsSource, error) {
	api, err := newAPISource(cfg, o.APIServer, bound)
	if err != nil {
		return nil, fmt.Errorf("APIServer reads: %w", err)
	}
	return &tlsSource{api: api, name: o.APIServer, legacy: o.LegacyAdhering, absent: o.Absent}, nil
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
func (t *tlsSource) read(ctx context.Context) (TLSProfile, error) {
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
func (t *tlsSource) resolve(obj map[string]any) (TLSProfile, error) {
	p, err := resolveTLSProfile(obj, t.legacy)
	if err != nil {
		return TLSProfile{}, &profileError{err}
	}
	return p, nil
}

// whenAbsent is the fallback profile, or the reason to wait for one.
func (t *tlsSource) whenAbsent(why error) (TLSProfile, error) {
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

// tlsComparison holds a live TLS profile against the snapshot's, as the
// comparison does the FeatureGate, and asks for the stop when they differ
// in what the component serves with.
type tlsComparison struct {
	startup *startup
	stopper *stopper
	name    string
	events  eventWriter
	metrics metrics
	log     logr.Logger

	mu sync.Mutex
	// unreadable is the last unservable live profile logged: logged again
	// only when it changes, as the prover reads every half bound.
	unreadable string
}

// compare compares live (or the reason it cannot be served, err) with the
// snapshot's profile, and reports whether the stop is requested.
func (c *tlsComparison) compare(ctx context.Context, live TLSProfile, err error, detectedBy string) bool {
	snapshot, ok := c.startup.Snapshot()
	if !ok || snapshot.tls == nil {
		return false
	}
	if err != nil {
		c.mu.Lock()
		changed := c.unreadable != err.Error()
		c.unreadable = err.Error()
		c.mu.Unlock()
		if changed {
			c.log.Info("APIServer's TLS profile cannot be served; keeping the startup profile", "apiServer", c.name,
				"detectedBy", detectedBy, "reason", err.Error(), "startupTLSProfile", snapshot.tls.String())
		}
		return false
	}
	c.mu.Lock()
	c.unreadable = ""
	c.mu.Unlock()
	d := tlsDiff(*snapshot.tls, live)
	if len(d) == 0 {
		return false
	}
	reason := fmt.Sprintf("APIServer %s TLS profile changed: %v", c.name, d)
	if !c.stopper.Stop(reason, nil) {
		return true // reported by whoever saw it first
	}
	c.log.Info("TLS security profile changed; requesting shutdown", "apiServer", c.name, "diff", d, "detectedBy", detectedBy,
		"startupTLSProfile", snapshot.tls.String(), "liveTLSProfile", live.String())
	ref := &corev1.ObjectReference{APIVersion: configv1.GroupVersion.String(), Kind: "APIServer", Name: c.name}
	c.events.record(ctx, ref, corev1.EventTypeWarning, reasonTLSProfileChanged, "Compare", reason+"; requesting shutdown")
	c.metrics.shutdownRequests.Inc()
	return true
}

// verify is the prover's second read: it proves the profile with the
// FeatureGate. An answer that cannot be served is an answer (the snapshot
// is kept, as the comparison says); only no answer is no proof.
func (c *tlsComparison) verify(src *tlsSource) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		live, err := src.read(ctx)
		var bad *profileError
		if err != nil && !errors.As(err, &bad) {
			if ctx.Err() != nil {
				return false, fmt.Errorf("%w to a consistent read of APIServer %s: %w", errNoAnswer, src.name, ctx.Err())
			}
			return false, err
		}
		return c.compare(ctx, live, err, "freshness"), nil
	}
}
