package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// A role's /metrics tells per-node room: only callers the API server
// authenticates and allows to get the non-resource URL /metrics read it, and
// the plain probe port has no metrics at all.
func TestMetricsNeedAuthorizedCaller(t *testing.T) {
	ctx := context.Background()
	const ns = "metrics-auth"
	c := apiOnlyCluster(t, ns)
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	role := framework.StartRole(t, c, "extender", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--publisher-lease-name=")
	ep, ok := stack.MetricsOf(role.HealthPort)
	if !ok {
		t.Fatal("StartRole registered no metrics endpoint")
	}
	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", ep.Port)

	// A scraper bound to the ClusterRole deploy/ ships for scrapers, and an
	// account without it.
	reader := shippedClusterRole(t, "kube-reclaim-metrics-reader")
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-auth-test-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, other := saToken(t, c, ns, "scraper"), saToken(t, c, ns, "other")
	// The role caches a denial for a while: ask the API server first that
	// the binding is in force, so the positive control cannot meet one.
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		return allowedMetrics(t, c, "system:serviceaccount:"+ns+":scraper")
	}); !ok {
		t.Fatal("the API server never allowed the bound ServiceAccount to get /metrics")
	}
	if allowedMetrics(t, c, "system:serviceaccount:"+ns+":other") {
		t.Fatal("the unbound ServiceAccount may get /metrics: the 403 case would prove nothing")
	}

	for _, tc := range []struct {
		name, url, token string
		code             int
		body             string
	}{
		{name: "no token is unauthorized", url: metricsURL, code: http.StatusUnauthorized, body: "needs a bearer token"},
		{name: "a token the API server does not know is unauthorized", url: metricsURL, token: "forged-token", code: http.StatusUnauthorized,
			body: "did not accept the bearer token"},
		{name: "an account without the ClusterRole is forbidden", url: metricsURL, token: other, code: http.StatusForbidden,
			body: `user "system:serviceaccount:metrics-auth:other" may not get /metrics`},
		{name: "an account bound to the ClusterRole reads the role's metrics", url: metricsURL, token: scraper, code: http.StatusOK,
			body: "kube_reclaim_extender_"},
		{name: "the plain probe port has no metrics", url: fmt.Sprintf("http://127.0.0.1:%d/metrics", role.HealthPort), token: scraper,
			code: http.StatusNotFound},
		{name: "the plain probe port answers probes", url: fmt.Sprintf("http://127.0.0.1:%d/readyz", role.HealthPort), code: http.StatusOK, body: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := stack.GetHTTPS(ctx, tc.url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(body), tc.body) {
				t.Errorf("GET %s: %d %.300q, want %d with %q", tc.url, code, body, tc.code, tc.body)
			}
			if code != http.StatusOK && strings.Contains(string(body), "kube_reclaim_") {
				t.Errorf("GET %s: refused, yet the body holds metrics", tc.url)
			}
		})
	}

	// Every outcome is counted; this scrape, with the admin's token, counts
	// itself as allowed.
	body, err := stack.GetMetrics(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	for outcome, want := range map[string]float64{"no-token": 1, "invalid-token": 1, "denied": 1, "allowed": 2, "authentication-error": 0} {
		got, err := framework.SumSamples(bytes.NewReader(body), "kube_reclaim_metrics_requests_total", "outcome", outcome)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("kube_reclaim_metrics_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

// shippedClusterRole returns the ClusterRole name of deploy/default.
func shippedClusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" && u.GetName() == name {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			return &role
		}
	}
	t.Fatalf("deploy/default has no ClusterRole %s", name)
	return nil
}

// saToken creates the ServiceAccount ns/name and returns a token of it.
func saToken(t *testing.T, c *cluster.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// allowedMetrics asks the API server whether user may get /metrics.
func allowedMetrics(t *testing.T, c *cluster.Cluster, user string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
		Groups:                []string{"system:serviceaccounts", "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
	got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}
