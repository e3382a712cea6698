package featuregate

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The guard's parts, for their own tests.
type (
	Startup = startup
	Getter  = getter
)

func NewStartup(r Getter, o Options) *Startup { return newStartup(r, o, nil) }

var (
	NewStopper    = newStopper
	NewLiveGetter = newLiveGetter
)

func MapperProvider(cfg *rest.Config, c *http.Client) (meta.RESTMapper, error) {
	return mapperProvider(nil)(cfg, c)
}

// SetupWithReader is SetupWithManager with the FeatureGate controller
// reading through wrap(the cache), so that a test can see what it read.
func SetupWithReader(g *Guard, mgr manager.Manager, wrap func(client.Reader) client.Reader) error {
	return g.setup(mgr, wrap(mgr.GetCache()))
}

// ReconcilerOf is the guard's FeatureGate reconciler, once set up.
func ReconcilerOf(g *Guard) reconcile.Reconciler { return g.reconciler }

// RaiseAlarm is what a failed request of the manager does.
func RaiseAlarm(g *Guard) { g.alarm.raise() }

// StartVerifier runs the outage verifier alone, reading live.
func StartVerifier(ctx context.Context, g *Guard) error {
	return g.verifier().Start(ctx)
}

// StartStartup runs the startup read alone.
func StartStartup(ctx context.Context, g *Guard) error { return g.startup.Start(ctx) }
