package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// TestWebhookHA runs two --self-signed webhook processes against one CA
// Secret, as the two replicas of deploy/default do. Each has its own
// MutatingWebhookConfiguration (a URL to its own port), so the apiserver calls
// both on every node status write and both must be trusted through the
// caBundle they patched from the shared Secret.
func TestWebhookHA(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true, NoScheduler: true})
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "ha", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)
	// Replica 0 runs as deploy/default's webhook: its names, and the RBAC of
	// that overlay through an impersonating kubeconfig, so the shipped rules
	// are shown to be enough. Replica 1 has a configuration of its own.
	const ns, secretName = "kube-reclaim", "kube-reclaim-webhook-ca"
	framework.CreateNamespace(t, c, ns)
	applyWebhookRBAC(t, c)
	kubeconfigs := []string{serviceAccountKubeconfig(t, c, ns, "kube-reclaim-webhook"), c.Kubeconfig()}
	heartbeat := 30 * time.Second // 4s + jitter, with room for a busy machine

	// Configurations first, processes started together: both race to create
	// the Secret.
	replicas := make([]*framework.Role, 2)
	configs := []string{webhook.DefaultConfigurationName, "kube-reclaim-webhook-ha-1"}
	ports := make([]int, 2)
	var err error
	for i := range replicas {
		if ports[i], err = cluster.FreePort(); err != nil {
			t.Fatal(err)
		}
		cfg := webhook.MutatingWebhookConfiguration(configs[i],
			webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", ports[i], webhook.Path), nil))
		if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range replicas {
		healthPort, serving, err := stack.ServingFlags(c)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("webhook-ha-%d", i)
		if err := c.StartProcess(name, framework.KubeReclaim(t), "webhook", "--kubeconfig="+kubeconfigs[i],
			serving[0], serving[1], "--log-level=debug",
			fmt.Sprintf("--listen-address=127.0.0.1:%d", ports[i]), "--self-signed", "--extra-sans=127.0.0.1",
			"--webhook-configuration-name="+configs[i], "--ca-secret-name="+secretName, "--ca-secret-namespace="+ns,
			"--publisher-lease-name="); err != nil {
			t.Fatal(err)
		}
		replicas[i] = framework.AttachRole(c, name, healthPort)
	}
	for _, r := range replicas {
		r.WaitReady(t, 60*time.Second)
	}

	secret, err := c.Client.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CA Secret: %v", err)
	}
	caBundle := secret.Data[certauthority.SecretBundleKey]
	cas, err := certutil.ParseCertsPEM(caBundle)
	if err != nil || len(cas) != 1 || !cas[0].IsCA {
		t.Fatalf("Secret %s: %s holds %d certificates (err %v), want one CA", secretName, certauthority.SecretBundleKey, len(cas), err)
	}
	created := 0
	for _, r := range replicas {
		created += strings.Count(c.Process(r.Name).Tail(1<<24), `msg="created the CA Secret"`)
	}
	if created != 1 {
		t.Errorf("%d processes say they created the CA Secret, want exactly 1", created)
	}

	t.Run("both caBundles are the Secret's CA and both processes serve their own certificate from it", func(t *testing.T) {
		for _, name := range configs {
			cfg, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, caBundle) {
				t.Errorf("%s: caBundle differs from the Secret's %s", name, certauthority.SecretBundleKey)
			}
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caBundle)
		serials := map[string]bool{}
		for i, p := range ports {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatalf("replica %d is not trusted through the Secret's CA: %v", i, err)
			}
			leaf := conn.ConnectionState().PeerCertificates[0]
			conn.Close()
			serials[leaf.SerialNumber.String()] = true
		}
		if len(serials) != 2 {
			t.Errorf("the two processes serve %d distinct certificates, want 2 (each issues its own)", len(serials))
		}
	})

	reviews := func() []float64 {
		out := make([]float64, len(replicas))
		for i, r := range replicas {
			out[i] = r.Metric(t, "kube_reclaim_webhook_review_duration_seconds_count")
		}
		return out
	}
	// bothCalled waits until the apiserver has called every replica at
	// least twice more than before (each call a TLS handshake verified
	// against the caBundle) and the node carries the annotation's values.
	bothCalled := func(t *testing.T, node string, cpu int64) {
		t.Helper()
		framework.SetAnnotation(t, c, node, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: 1 << 30, Policy: "usage", WriteTime: time.Now()})
		before := reviews()
		var now []float64
		if _, ok := framework.Poll(2*heartbeat, 500*time.Millisecond, func() bool {
			now = reviews()
			for i := range now {
				if now[i] < before[i]+2 {
					return false
				}
			}
			return true
		}); !ok {
			t.Fatalf("reviews per replica went from %v to %v: not every replica is being called", before, now)
		}
		t.Logf("reviews per replica: %v -> %v", before, now)
		assertInjected(t, waitHeartbeat(t, c, node, heartbeat), cpu, 1<<30)
	}

	t.Run("the apiserver calls both processes on node status writes", func(t *testing.T) {
		bothCalled(t, nodes[0], 3000)
		for i, r := range replicas {
			if e := r.Metric(t, "kube_reclaim_webhook_errors_total"); e != 0 {
				t.Errorf("replica %d counted %v errors", i, e)
			}
		}
	})

	t.Run("a restarted process reuses the Secret's CA", func(t *testing.T) {
		if err := c.KillComponent(replicas[1].Name); err != nil {
			t.Fatal(err)
		}
		if err := c.StartComponent(replicas[1].Name); err != nil {
			t.Fatal(err)
		}
		replicas[1].WaitReady(t, 60*time.Second)
		after, err := c.Client.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.UID != secret.UID || after.ResourceVersion != secret.ResourceVersion {
			t.Errorf("the CA Secret was replaced or rewritten by the restart (uid %s -> %s, resourceVersion %s -> %s)",
				secret.UID, after.UID, secret.ResourceVersion, after.ResourceVersion)
		}
		for _, name := range configs {
			cfg, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, caBundle) {
				t.Errorf("%s: caBundle changed by the restart", name)
			}
		}
		bothCalled(t, nodes[1], 4000)
	})
}

// applyWebhookRBAC creates the webhook's ServiceAccount and RBAC objects as
// deploy/default renders them.
func applyWebhookRBAC(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}
	rbac := c.Client.RbacV1()
	applied := 0
	var webhookObjs []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetLabels()["app.kubernetes.io/component"] != "webhook" {
			continue
		}
		webhookObjs = append(webhookObjs, u)
		var err error
		switch u.GetKind() {
		case "ServiceAccount":
			var o corev1.ServiceAccount
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err == nil {
				_, err = c.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "Role":
			var o rbacv1.Role
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err == nil {
				_, err = rbac.Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "RoleBinding":
			var o rbacv1.RoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err == nil {
				_, err = rbac.RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err == nil {
				_, err = rbac.ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
			}
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err == nil {
				_, err = rbac.ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
			}
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		applied++
	}
	if applied < 5 { // ServiceAccount, Role+binding (lease), ClusterRole+binding, Role+binding (CA Secret)
		t.Fatalf("only %d webhook RBAC objects in deploy/default", applied)
	}
	// The processes start right after: they must not meet an authorizer
	// that has not seen these objects yet.
	waitBindingsInEffect(t, c.Client, webhookObjs)
}

// serviceAccountKubeconfig is the cluster's kubeconfig impersonating the
// ServiceAccount ns/name, as a pod running under it would authenticate.
func serviceAccountKubeconfig(t *testing.T, c *cluster.Cluster, ns, name string) string {
	t.Helper()
	path, cs := kubeconfigAs(t, c, name, c.Impersonating("system:serviceaccount:"+ns+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"))
	// Positive control: the impersonated identity is refused what the RBAC
	// does not grant.
	if _, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the webhook's ServiceAccount may list secrets (err %v)", err)
	}
	return path
}
