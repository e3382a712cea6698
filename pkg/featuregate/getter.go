package featuregate

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// getter is the part of client.Reader that reading a FeatureGate needs.
type getter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// newLiveGetter reads FeatureGates straight from the API server, with no
// retries of its own. client-go otherwise retries a GET on its own schedule:
// ten times on a dropped connection, and after a 429's Retry-After, which
// kube-apiserver sets to 5 s while it shuts down. One such attempt would hold
// the startup read (or the outage verifier) for seconds past the API's
// return, whatever the backoff cap says; the callers here own their retries.
func newLiveGetter(cfg *rest.Config) (getter, error) {
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &configv1.GroupVersion
	cfg.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("FeatureGate client: %w", err)
	}
	return liveGetter{rc}, nil
}

type liveGetter struct{ rc *rest.RESTClient }

func (g liveGetter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if _, ok := obj.(*configv1.FeatureGate); !ok {
		return fmt.Errorf("live getter reads FeatureGates, not %T", obj)
	}
	return g.rc.Get().Resource("featuregates").Name(key.Name).MaxRetries(0).Do(ctx).Into(obj)
}
