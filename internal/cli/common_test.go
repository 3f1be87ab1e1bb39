package cli

import (
	"strings"
	"testing"

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
			e, err := c.Endpoints(nil)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Endpoints(nil) error = %v, want %q", err, tc.wantErr)
			}
			if got := e.Metrics.Client != nil; got != tc.wantClient {
				t.Errorf("client made: %v, want %v", got, tc.wantClient)
			}
		})
	}
}
