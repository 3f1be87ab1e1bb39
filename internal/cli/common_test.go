package cli

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
)

func TestCommonValidateMetricsFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Common)
		want   string // "" means valid
	}{
		{name: "the defaults are valid", change: func(*Common) {}},
		{name: "an empty metrics address turns metrics off", change: func(c *Common) { c.MetricsAddress = "" }},
		{name: "a metrics address without a port is refused", change: func(c *Common) { c.MetricsAddress = "localhost" }, want: "--metrics-address"},
		{name: "metrics and probes on one address are refused", change: func(c *Common) { c.MetricsAddress = c.HealthAddress }, want: "their own port"},
		{name: "a certificate without its key is refused", change: func(c *Common) { c.MetricsTLSCertFile = "tls.crt" }, want: "go together"},
		{name: "a key without its certificate is refused", change: func(c *Common) { c.MetricsTLSKeyFile = "tls.key" }, want: "go together"},
		{name: "a zero review rate is refused", change: func(c *Common) { c.MetricsAuthQPS = 0 }, want: "--metrics-auth-qps"},
		{name: "no review in flight is refused", change: func(c *Common) { c.MetricsAuthMaxInFlight = 0 }, want: "--metrics-auth-max-in-flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultCommon(":8081")
			tc.change(&c)
			err := c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEndpointsMakeAReviewClient(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	for _, tc := range []struct {
		name       string
		metrics    string
		kubeconfig bool
		wantErr    string
		wantClient bool
	}{
		{name: "metrics off need no API server", metrics: ""},
		{name: "metrics on build a client from the kubeconfig", metrics: "127.0.0.1:0", kubeconfig: true, wantClient: true},
		{name: "metrics on without any API server is an error that says how to turn them off", metrics: "127.0.0.1:0", wantErr: "--metrics-address="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultCommon("127.0.0.1:0")
			c.MetricsAddress = tc.metrics
			if tc.kubeconfig {
				c.Kubeconfig = servingtest.NewReviewAPI(t).Kubeconfig
			}
			c.MetricsAuthQPS, c.MetricsAuthMaxInFlight = 3, 7
			e, err := c.Endpoints("kube-reclaim-test")
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Endpoints error = %v, want %q", err, tc.wantErr)
			}
			if got := e.Metrics.Client != nil; got != tc.wantClient {
				t.Fatalf("client made: %v, want %v", got, tc.wantClient)
			}
			if !tc.wantClient {
				return
			}
			// The reviews have their own rate, not --kube-api-qps.
			if got := e.Metrics.Client.(*kubernetes.Clientset).AuthenticationV1().RESTClient().GetRateLimiter().QPS(); got != 3 {
				t.Errorf("review client QPS %v, want --metrics-auth-qps 3 (the role's is %v)", got, c.QPS)
			}
			if e.Metrics.MaxInFlightReviews != 7 {
				t.Errorf("MaxInFlightReviews %d, want --metrics-auth-max-in-flight 7", e.Metrics.MaxInFlightReviews)
			}
		})
	}
}
