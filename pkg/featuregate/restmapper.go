package featuregate

import (
	"net/http"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// mapperProvider returns a manager.Options.MapperProvider that knows the
// FeatureGate (and ClusterOperator) mappings without asking the API server,
// and asks next (discovery when nil) for everything else. Building a cache
// restricted with ByObject asks whether the type is namespaced; with
// discovery alone that question fails, and so does the manager, when the
// API is not up yet — which is exactly when we must start and wait.
func mapperProvider(next func(*rest.Config, *http.Client) (meta.RESTMapper, error)) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	if next == nil {
		next = apiutil.NewDynamicRESTMapper
	}
	return func(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
		discovered, err := next(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		static := meta.NewDefaultRESTMapper([]schema.GroupVersion{configv1.GroupVersion})
		static.Add(configv1.GroupVersion.WithKind("FeatureGate"), meta.RESTScopeRoot)
		static.Add(configv1.GroupVersion.WithKind("ClusterOperator"), meta.RESTScopeRoot)
		return &knownFirst{RESTMapper: discovered, known: static}, nil
	}
}

type knownFirst struct {
	meta.RESTMapper
	known meta.RESTMapper
}

func (m *knownFirst) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if mapping, err := m.known.RESTMapping(gk, versions...); err == nil {
		return mapping, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}
