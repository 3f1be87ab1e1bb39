package serving_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
)

// serve runs h.Serve on e until the test ends and waits for both servers.
func serve(t *testing.T, h *serving.Health, e serving.Endpoints) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, e) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range []string{e.HealthAddress, e.Metrics.Address} {
		for addr != "" {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not listening: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func reviewClient(t *testing.T, api *servingtest.ReviewAPI) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", api.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	api := servingtest.NewReviewAPI(t)
	reg := prometheus.NewRegistry()
	h := serving.NewHealth(reg)
	e := serving.Endpoints{HealthAddress: servingtest.FreeAddr(t), Metrics: serving.SecureMetrics{Address: servingtest.FreeAddr(t), Client: reviewClient(t, api)}}
	serve(t, h, e)
	metricsURL := "https://" + e.Metrics.Address + "/metrics"

	for _, tc := range []struct {
		name, url, token string
		code             int
		body             string
	}{
		{name: "no token is unauthorized", url: metricsURL, code: http.StatusUnauthorized, body: "needs a bearer token"},
		{name: "an unknown token is unauthorized", url: metricsURL, token: "forged", code: http.StatusUnauthorized, body: "did not accept the bearer token"},
		{name: "a caller without the ClusterRole is forbidden", url: metricsURL, token: servingtest.DeniedToken, code: http.StatusForbidden,
			body: `user "someone" may not get /metrics`},
		{name: "an allowed caller reads the metrics", url: metricsURL, token: servingtest.AllowedToken, code: http.StatusOK, body: "go_goroutines"},
		{name: "the metrics port has nothing else", url: "https://" + e.Metrics.Address + "/healthz", token: servingtest.AllowedToken, code: http.StatusNotFound},
		{name: "the probe port has no metrics", url: "http://" + e.HealthAddress + "/metrics", code: http.StatusNotFound},
		{name: "the probe port answers probes without a token", url: "http://" + e.HealthAddress + "/readyz", code: http.StatusOK, body: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.url, tc.token)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.url, code, body, tc.code, tc.body)
			}
		})
	}

	// Every outcome is counted; the allowed scrape above sees itself.
	_, body := get(t, metricsURL, servingtest.AllowedToken)
	for _, want := range []string{
		`kube_reclaim_metrics_requests_total{outcome="allowed"} 2`,
		`kube_reclaim_metrics_requests_total{outcome="no-token"} 1`,
		`kube_reclaim_metrics_requests_total{outcome="invalid-token"} 1`,
		`kube_reclaim_metrics_requests_total{outcome="denied"} 1`,
		`kube_reclaim_metrics_requests_total{outcome="throttled"} 0`,
		`kube_reclaim_metrics_requests_total{outcome="authentication-error"} 0`,
		`kube_reclaim_metrics_requests_total{outcome="authorization-error"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The allowed token scraped twice: reviews are cached, one per token and
	// one per user.
	if got := api.TokenReviews.Load(); got != 3 {
		t.Errorf("%d TokenReviews, want 3 (one per distinct token: forged, denied, allowed)", got)
	}
	if got := api.AccessReviews.Load(); got != 2 {
		t.Errorf("%d SubjectAccessReviews, want 2 (one per user, cached)", got)
	}
}

func TestMetricsFailClosedWhenTheAPIServerIsGone(t *testing.T) {
	api := servingtest.NewReviewAPI(t)
	client := reviewClient(t, api)
	api.Close()
	h := serving.NewHealth(prometheus.NewRegistry())
	e := serving.Endpoints{HealthAddress: servingtest.FreeAddr(t), Metrics: serving.SecureMetrics{Address: servingtest.FreeAddr(t), Client: client}}
	serve(t, h, e)
	code, body := get(t, "https://"+e.Metrics.Address+"/metrics", servingtest.AllowedToken)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "TokenReview") || strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics with the API server gone: %d %q, want 503 naming the TokenReview, and no metrics", code, body)
	}
}

func TestMetricsServeTheCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("metrics.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	api := servingtest.NewReviewAPI(t)
	h := serving.NewHealth(prometheus.NewRegistry())
	e := serving.Endpoints{HealthAddress: servingtest.FreeAddr(t), Metrics: serving.SecureMetrics{Address: servingtest.FreeAddr(t), CertFile: certFile, KeyFile: keyFile, Client: reviewClient(t, api)}}
	serve(t, h, e)
	conn, err := tls.Dial("tcp", e.Metrics.Address, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the certificate served
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; !strings.HasPrefix(got, "metrics.example") {
		t.Errorf("served certificate %q, want the one of --metrics-tls-cert-file", got)
	}
	if failed := h.Ready(); len(failed) != 0 {
		t.Errorf("Ready() = %q", failed)
	}
}

func TestMetricsOffServesProbesOnly(t *testing.T) {
	h := serving.NewHealth(prometheus.NewRegistry())
	e := serving.Endpoints{HealthAddress: servingtest.FreeAddr(t)}
	serve(t, h, e)
	if code, _ := get(t, "http://"+e.HealthAddress+"/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get(t, "http://"+e.HealthAddress+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("/metrics on the probe port: %d, want 404", code)
	}
}

func TestMetricsNeedAClient(t *testing.T) {
	h := serving.NewHealth(prometheus.NewRegistry())
	err := h.Serve(context.Background(), serving.Endpoints{HealthAddress: servingtest.FreeAddr(t), Metrics: serving.SecureMetrics{Address: servingtest.FreeAddr(t)}})
	if err == nil || !strings.Contains(err.Error(), "TokenReview") {
		t.Errorf("Serve without a client = %v, want an error naming the reviews", err)
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return servingtest.Get(t, url, token)
}
