package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// The scrape components/monitoring configures (deploy_test checks the
// component carries these): the name every role's metrics certificate is
// issued for and the PodMonitors verify, and the audience the roles accept
// tokens for.
const (
	metricsServerName = "kube-reclaim-metrics.kube-reclaim.svc"
	metricsAudience   = "kube-reclaim-metrics"
)

// checkVerifiedScrape runs a role as components/monitoring runs it (its
// metrics certificate from files issued by a CA, tokens for the metrics
// audience only) on c, and scrapes it as the shipped PodMonitors do: the
// certificate verified against the CA for metricsServerName, and a token of
// the account ns/account (bound to kube-reclaim-metrics-reader) requested
// for metricsAudience. The same account's token for the API server is
// refused, and the metrics-audience token is worthless against the API
// server.
func checkVerifiedScrape(t *testing.T, c *cluster.Cluster, ns, account string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	defer func() {
		t.Logf("verified scrape with a metrics-audience token: checked in %s", time.Since(start).Round(time.Millisecond))
	}()
	ca, err := cluster.NewCA("kube-reclaim-metrics-ca")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert(metricsServerName, metricsServerName)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := kp.Write(t.TempDir(), "metrics")
	if err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	role := framework.StartRole(t, c, "extender-verified-metrics", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", port),
		"--publisher-lease-name=", "--metrics-tls-cert-file="+certFile, "--metrics-tls-private-key-file="+keyFile,
		"--metrics-token-audiences="+metricsAudience)
	ep, ok := stack.MetricsOf(role.HealthPort)
	if !ok {
		t.Fatal("StartRole registered no metrics endpoint")
	}
	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", ep.Port)

	token := func(audiences ...string) string {
		tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s/%s for %q: %v", ns, account, audiences, err)
		}
		return tr.Status.Token
	}
	forMetrics, forAPIServer := token(metricsAudience), token()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	get := func(serverName, bearer string) (int, string, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		defer client.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	t.Run("a verified scrape with a token for the metrics audience reads the metrics", func(t *testing.T) {
		code, body, err := get(metricsServerName, forMetrics)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "kube_reclaim_extender_") {
			t.Errorf("GET %s as %s: %d %.200q %v, want 200 with the extender's metrics", metricsURL, metricsServerName, code, body, err)
		}
	})
	t.Run("the same account's token for the API server is unauthorized", func(t *testing.T) {
		code, body, err := get(metricsServerName, forAPIServer)
		if err != nil || code != http.StatusUnauthorized || strings.Contains(body, "kube_reclaim_") {
			t.Errorf("GET %s with an API server token: %d %.200q %v, want 401", metricsURL, code, body, err)
		}
	})
	t.Run("the certificate is verified: another name fails the handshake", func(t *testing.T) {
		if code, _, err := get("kube-reclaim-webhook.kube-reclaim.svc", forMetrics); err == nil {
			t.Errorf("GET %s verifying another name: %d, want a certificate error", metricsURL, code)
		}
	})
	t.Run("the metrics-audience token is refused by the API server", func(t *testing.T) {
		as := func(bearer string) error {
			cfg := rest.AnonymousClientConfig(c.RESTConfig())
			cfg.BearerToken = bearer
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			return err
		}
		// Positive control: the API server's token of the same account is
		// accepted there.
		if err := as(forAPIServer); err != nil {
			t.Fatalf("the API server refused the account's own token: %v", err)
		}
		if err := as(forMetrics); err == nil {
			t.Error("the API server accepted a token issued for the metrics audience")
		}
	})
}
