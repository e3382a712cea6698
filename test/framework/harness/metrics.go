package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"time"
)

// scrapeClient trusts any certificate: the operator's metrics endpoint
// serves the self-signed one controller-runtime makes (as in
// config/prometheus/monitor.yaml, there is nothing to verify it against),
// and what the tests check is the bearer token's authentication and
// authorization.
var scrapeClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // see above
}

// Scrape GETs a metrics URL with a bearer token (none when empty), as
// Prometheus does: the status code and the body.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
