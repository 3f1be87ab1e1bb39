package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
)

// MetricsPath is the only path of the metrics server, and the non-resource
// path a caller must be allowed to get.
const MetricsPath = "/metrics"

// Outcomes of a request to the metrics server, as counted by
// kube_reclaim_metrics_requests_total.
const (
	OutcomeAllowed      = "allowed"
	OutcomeNoToken      = "no-token"
	OutcomeInvalidToken = "invalid-token"
	OutcomeDenied       = "denied"
	// OutcomeThrottled: the request needed a review and as many as the
	// server may send were in flight (429).
	OutcomeThrottled  = "throttled"
	OutcomeAuthnError = "authentication-error"
	OutcomeAuthzError = "authorization-error"
)

// Review results are cached, as kube-scheduler's secure port caches them,
// so a scraper costs the API server one TokenReview and one
// SubjectAccessReview per TTL rather than per scrape. A denial expires sooner
// so that a newly bound ClusterRole takes effect quickly. A refused token is
// cached too (as the API server's webhook authenticator caches failures), so
// that one sent again and again costs one review.
const (
	authnCacheTTL    = 2 * time.Minute
	authnRefusedTTL  = 30 * time.Second
	authzAllowTTL    = 2 * time.Minute
	authzDenyTTL     = 10 * time.Second
	reviewTimeout    = 10 * time.Second
	certReloadPeriod = time.Minute
)

// SecureMetrics configures the metrics server: HTTPS, and every request
// authenticated by a TokenReview and authorized by a SubjectAccessReview
// (verb get on the non-resource path /metrics) against the API server.
type SecureMetrics struct {
	// Address to listen on; empty turns the server off.
	Address string
	// CertFile and KeyFile hold the serving certificate, reloaded when they
	// change; both empty: a self-signed certificate generated at start.
	CertFile, KeyFile string
	// Client sends the TokenReviews and SubjectAccessReviews. It must be a
	// client of its own (its own rate limit and connections, see
	// cli.Common.Endpoints): callers of /metrics decide how many reviews
	// are needed, and the role's own calls (its Lease renewals first) must
	// never wait behind them.
	Client kubernetes.Interface
	// MaxInFlightReviews caps the reviews sent at once; a request that
	// needs one more is answered 429. 0: DefaultMaxInFlightReviews.
	MaxInFlightReviews int
	// TokenAudiences: a caller's token must have been issued for one of
	// them (a projected service account token with that audience); none:
	// the API server's own audiences. A token issued for the metrics server
	// alone cannot be replayed against the API server by whoever reads it
	// here, nor one issued for the API server be sent here.
	TokenAudiences []string
}

// metricsServer builds the metrics server of m and its TLS configuration;
// a certificate read from files is reloaded until ctx ends.
func (h *Health) metricsServer(ctx context.Context, m SecureMetrics) (*http.Server, *tls.Config, error) {
	if m.Client == nil {
		return nil, nil, errors.New("the metrics server needs an API client for TokenReview and SubjectAccessReview")
	}
	getCert, err := h.metricsCertificate(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	r := mux.NewRouter()
	r.Handle(MetricsPath, NewAuthorizedHandler(NewReviewer(m.Client, m.MaxInFlightReviews, m.TokenAudiences, h.reg), h.reg,
		promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{Registry: h.reg}))).Methods(http.MethodGet)
	return NewServer(m.Address, r), TLSConfig(getCert), nil
}

// metricsCertificate loads the certificate files, or generates a
// self-signed certificate when none are given: a scraper that wants to
// verify the server needs files from a CA it trusts.
func (h *Health) metricsCertificate(ctx context.Context, m SecureMetrics) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if m.CertFile != "" || m.KeyFile != "" {
		certs, err := NewCertReloader(m.CertFile, m.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("metrics serving certificate: %w", err)
		}
		h.AddReadyCheck("metrics-certificate", certs.Check)
		go certs.Run(ctx, certReloadPeriod)
		return certs.GetCertificate, nil
	}
	cert, err := SelfSignedCertificate()
	if err != nil {
		return nil, err
	}
	logrus.WithFields(logrus.Fields{"address": m.Address, "notAfter": cert.Leaf.NotAfter}).Info("metrics served with a self-signed certificate generated at start")
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }, nil
}

// SelfSignedCertificate generates a serving certificate for localhost, the
// loopback addresses and the host name, signed by a CA made for it, in
// memory.
func SelfSignedCertificate() (*tls.Certificate, error) {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil && name != "" && name != "localhost" {
		hosts = append(hosts, name)
	}
	now := time.Now()
	ca, err := certauthority.NewCA(pkix.Name{CommonName: "kube-reclaim-metrics-ca"}, now, certauthority.LeafValidity)
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed metrics certificate: %w", err)
	}
	cert, err := ca.Issue(certauthority.Spec{CommonName: "localhost", Hosts: hosts, Server: true, Validity: certauthority.LeafValidity}, now)
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed metrics certificate: %w", err)
	}
	return cert, nil
}
