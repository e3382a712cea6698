// Package metricsauth guards the metrics endpoint the way kube-apiserver
// guards its own: the caller's bearer token is checked with a TokenReview,
// and the request (a non-resource path and verb) with a SubjectAccessReview.
//
// controller-runtime's filters.WithAuthenticationAndAuthorization does the
// same through k8s.io/apiserver, which brings 195 packages and about 20 MiB
// of resident memory into a process that serves one endpoint; these two API
// calls, cached briefly, are all that is needed here.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// allowedFor is how long an answer that let a caller in is reused: a
	// scrape every few seconds costs the API server two calls a minute.
	allowedFor = time.Minute
	// deniedFor is shorter, so that a role just granted works soon.
	deniedFor = 10 * time.Second
	// reviewTimeout bounds each review.
	reviewTimeout = 10 * time.Second
)

// FilterProvider is a metricsserver.Options.FilterProvider.
func FilterProvider(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(authenticationv1.AddToScheme(scheme))
	utilruntime.Must(authorizationv1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(authenticationv1.SchemeGroupVersion.WithKind("TokenReview"), meta.RESTScopeRoot)
	mapper.Add(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"), meta.RESTScopeRoot)
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	g := &guard{client: c, cache: map[cacheKey]verdict{}, now: time.Now}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			code, reason := g.check(req)
			if code != http.StatusOK {
				log.V(1).Info("Metrics request refused", "code", code, "reason", reason, "path", req.URL.Path)
				http.Error(w, http.StatusText(code), code)
				return
			}
			next.ServeHTTP(w, req)
		}), nil
	}, nil
}

type cacheKey struct {
	token      [sha256.Size]byte
	verb, path string
}

type verdict struct {
	code    int
	reason  string
	expires time.Time
}

type guard struct {
	client client.Client
	now    func() time.Time

	mu    sync.Mutex
	cache map[cacheKey]verdict
}

// check answers 200, 401 (no or bad token), 403 (not allowed) or 500 (the
// API server could not say).
func (g *guard) check(req *http.Request) (int, string) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, "no bearer token"
	}
	key := cacheKey{token: sha256.Sum256([]byte(token)), verb: strings.ToLower(req.Method), path: req.URL.Path}
	g.mu.Lock()
	v, cached := g.cache[key]
	g.mu.Unlock()
	if cached && g.now().Before(v.expires) {
		return v.code, v.reason
	}
	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	v = g.review(ctx, token, key)
	if v.code == http.StatusInternalServerError {
		return v.code, v.reason // not an answer: ask again next time
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, old := range g.cache {
		if !g.now().Before(old.expires) {
			delete(g.cache, k)
		}
	}
	g.cache[key] = v
	return v.code, v.reason
}

func (g *guard) review(ctx context.Context, token string, key cacheKey) verdict {
	denied := func(code int, reason string) verdict {
		return verdict{code: code, reason: reason, expires: g.now().Add(deniedFor)}
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := g.client.Create(ctx, tr); err != nil {
		return verdict{code: http.StatusInternalServerError, reason: "TokenReview: " + err.Error()}
	}
	if !tr.Status.Authenticated {
		return denied(http.StatusUnauthorized, "token not authenticated: "+tr.Status.Error)
	}
	user := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: key.path, Verb: key.verb},
	}}
	if err := g.client.Create(ctx, sar); err != nil {
		return verdict{code: http.StatusInternalServerError, reason: "SubjectAccessReview: " + err.Error()}
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return denied(http.StatusForbidden, fmt.Sprintf("%s may not %s %s: %s", user.Username, key.verb, key.path, sar.Status.Reason))
	}
	return verdict{code: http.StatusOK, expires: g.now().Add(allowedFor)}
}
