package stack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// MetricsEndpoint is where a role serves /metrics (HTTPS, delegated
// authentication and authorization) and a bearer token allowed to read it.
type MetricsEndpoint struct {
	Port  int
	Token string
}

// endpoints maps a role's health port to its MetricsEndpoint: tests name a
// role by the port they wait for /readyz on, and scrape it by the same.
var endpoints sync.Map

// RegisterMetrics records that the role whose probes are on healthPort
// serves its metrics at ep.
func RegisterMetrics(healthPort int, ep MetricsEndpoint) { endpoints.Store(healthPort, ep) }

// MetricsOf returns the MetricsEndpoint registered for healthPort.
func MetricsOf(healthPort int) (MetricsEndpoint, bool) {
	ep, ok := endpoints.Load(healthPort)
	if !ok {
		return MetricsEndpoint{}, false
	}
	return ep.(MetricsEndpoint), true
}

// ServingFlags picks a health port and a metrics port on the loopback,
// registers the metrics port with c's admin token (system:masters passes any
// SubjectAccessReview) and returns the health port and the flags that make a
// role serve there.
func ServingFlags(c *cluster.Cluster) (healthPort int, flags []string, err error) {
	if healthPort, err = cluster.FreePort(); err != nil {
		return 0, nil, err
	}
	metricsPort, err := cluster.FreePort()
	if err != nil {
		return 0, nil, err
	}
	RegisterMetrics(healthPort, MetricsEndpoint{Port: metricsPort, Token: AdminToken(c)})
	return healthPort, []string{fmt.Sprintf("--health-address=127.0.0.1:%d", healthPort), fmt.Sprintf("--metrics-address=127.0.0.1:%d", metricsPort)}, nil
}

// AdminToken is the bearer token of c's admin, who may read every role's
// metrics.
func AdminToken(c *cluster.Cluster) string { return c.RESTConfig().BearerToken }

// metricsClient skips verification: a role's metrics certificate is
// self-signed at start, and the token is a test cluster's.
var metricsClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed, loopback only

// GetMetrics reads https://127.0.0.1:<ep.Port>/metrics with ep's token and
// returns the body; an answer other than 200 is an error with the body.
func GetMetrics(ctx context.Context, ep MetricsEndpoint) ([]byte, error) {
	code, body, err := GetHTTPS(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", ep.Port), ep.Token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics on port %d: HTTP %d: %s", ep.Port, code, body)
	}
	return body, nil
}

// GetHTTPS GETs url without verifying the server, with token as a bearer
// token unless empty, and returns the status code and body.
func GetHTTPS(ctx context.Context, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, body, err
}
