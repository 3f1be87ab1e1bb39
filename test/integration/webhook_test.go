package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// waitHeartbeat waits for the node's next kwok heartbeat (a new Ready
// heartbeat time) after now, and returns the node as stored after it.
func waitHeartbeat(t *testing.T, c *cluster.Cluster, node string, timeout time.Duration) *corev1.Node {
	t.Helper()
	return framework.WaitHeartbeat(t, c, node, view(t, c, node).Heartbeat, timeout)
}

func assertInjected(t *testing.T, n *corev1.Node, cpu, mem int64) {
	t.Helper()
	for _, r := range []struct {
		name corev1.ResourceName
		want int64
	}{{names.CPU, cpu}, {names.Memory, mem}} {
		c, hasC := n.Status.Capacity[r.name]
		a, hasA := n.Status.Allocatable[r.name]
		if !hasC || !hasA || c.Value() != r.want || a.Value() != r.want {
			t.Errorf("node %s %s: capacity %s allocatable %s, want %d in both", n.Name, r.name, c.String(), a.String(), r.want)
		}
	}
}

// startWebhook serves the webhook with a certificate from the cluster CA and
// registers it for nodes/status (failurePolicy Ignore, timeout 2s).
func startWebhook(t *testing.T, c *cluster.Cluster, certDir string, port int, extra ...string) *framework.Role {
	t.Helper()
	kp, err := c.CA().ServingCert("kube-reclaim-webhook")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := kp.Write(certDir, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile, "--tls-reload-interval=1s"}, extra...)
	return framework.StartRole(t, c, "webhook", "webhook", args...)
}

// registeredWebhook is the webhook role, started with a serving certificate
// of the test CA and registered with the API server under the shipped
// configuration, pointing at 127.0.0.1.
type registeredWebhook struct {
	*framework.Role
	Config  *admissionregistrationv1.MutatingWebhookConfiguration
	Port    int
	CertDir string
}

func registerWebhook(t *testing.T, c *cluster.Cluster, extra ...string) registeredWebhook {
	t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	wh := startWebhook(t, c, certDir, port, extra...)
	cfg := webhook.MutatingWebhookConfiguration("kube-reclaim-webhook",
		webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path), c.CA().CertPEM))
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the apiserver refuses the shipped webhook configuration: %v", err)
	}
	return registeredWebhook{Role: wh, Config: cfg, Port: port, CertDir: certDir}
}

// waitNodeReview waits for the first node review: the apiserver loads a new
// configuration through an informer, so a heartbeat right after the create
// may still go unreviewed, and a test asserting on the next heartbeat
// starts once one has been reviewed.
func (w registeredWebhook) waitNodeReview(t *testing.T, within time.Duration) {
	t.Helper()
	if _, ok := framework.Poll(within, 500*time.Millisecond, func() bool {
		return w.Metric(t, "kube_reclaim_webhook_review_duration_seconds_count") > 0
	}); !ok {
		t.Fatal("the apiserver never called the webhook on a heartbeat")
	}
}

func TestWebhook(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true})
	nodes := framework.AddReadyNodes(t, c, 3, cluster.NodeSpec{NamePrefix: "wh", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)
	wh := registerWebhook(t, c, "--stale-after=1m", "--publisher-lease-name=", "--oversell=true")
	port, certDir := wh.Port, wh.CertDir
	heartbeat := 30 * time.Second // 4s + jitter, with room for a busy machine
	wh.waitNodeReview(t, 2*heartbeat)

	t.Run("a fresh annotation lands equal in capacity and allocatable on the next heartbeat and survives removal", func(t *testing.T) {
		framework.SetAnnotation(t, c, nodes[0], reclaimable.Annotation{CPUMilli: 3000, MemoryBytes: 2 << 30, Policy: "usage", WriteTime: time.Now()})
		n := waitHeartbeat(t, c, nodes[0], heartbeat)
		assertInjected(t, n, 3000, 2<<30)
		// Remove the values by hand, as kubelet re-registration would zero them.
		framework.ClearReclaimedStatus(t, c, nodes[0])
		n = waitHeartbeat(t, c, nodes[0], heartbeat)
		assertInjected(t, n, 3000, 2<<30)
	})

	t.Run("a stale annotation turns into zero on the next heartbeat", func(t *testing.T) {
		framework.SetAnnotation(t, c, nodes[1], reclaimable.Annotation{CPUMilli: 5000, MemoryBytes: 1 << 30, Policy: "usage", WriteTime: time.Now()})
		assertInjected(t, waitHeartbeat(t, c, nodes[1], heartbeat), 5000, 1<<30)
		framework.SetAnnotation(t, c, nodes[1], reclaimable.Annotation{CPUMilli: 5000, MemoryBytes: 1 << 30, Policy: "usage", WriteTime: time.Now().Add(-2 * time.Minute)})
		assertInjected(t, waitHeartbeat(t, c, nodes[1], heartbeat), 0, 0)
		if wh.Metric(t, "kube_reclaim_webhook_stale_injections_total", "reason", "annotation-too-old") < 1 {
			t.Error("stale injection not counted")
		}
	})

	t.Run("cert files replaced on disk are served without restart; TLS 1.1 is refused", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.CA().CertPEM)
		serial := func() string {
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		before := serial()
		kp, err := c.CA().ServingCert("kube-reclaim-webhook-rotated")
		if err != nil {
			t.Fatal(err)
		}
		// Write key and cert through temp files and renames, as a Secret update does.
		for _, f := range []struct {
			name string
			data []byte
		}{{"webhook.key", kp.KeyPEM}, {"webhook.crt", kp.CertPEM}} {
			tmp := filepath.Join(certDir, f.name+".tmp")
			if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(certDir, f.name)); err != nil {
				t.Fatal(err)
			}
		}
		took, ok := framework.Poll(60*time.Second, 500*time.Millisecond, func() bool { return serial() == kp.Cert.SerialNumber.String() })
		if !ok {
			t.Fatalf("still serving serial %s, want %s", serial(), kp.Cert.SerialNumber)
		}
		t.Logf("new certificate (serial %s, was %s) served after %s", kp.Cert.SerialNumber, before, took.Round(100*time.Millisecond))
		if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: tls.VersionTLS11}); err == nil {
			t.Error("a TLS 1.1 client was accepted")
		}
		// The apiserver still reaches the webhook with the rotated certificate.
		framework.SetAnnotation(t, c, nodes[0], reclaimable.Annotation{CPUMilli: 3100, MemoryBytes: 2 << 30, Policy: "usage", WriteTime: time.Now()})
		assertInjected(t, waitHeartbeat(t, c, nodes[0], heartbeat), 3100, 2<<30)
	})

	t.Run("webhook killed for 60s: heartbeats continue, no node turns NotReady, injection resumes", func(t *testing.T) {
		if err := c.KillComponent("webhook"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		beats := map[string]int{}
		last := map[string]time.Time{}
		for time.Since(start) < 60*time.Second {
			list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				n := &list.Items[i]
				if !cluster.NodeReady(n) {
					t.Errorf("node %s not Ready while the webhook is down", n.Name)
				}
				if hb := framework.ReadyHeartbeat(n); hb.After(last[n.Name]) {
					if !last[n.Name].IsZero() {
						beats[n.Name]++
					}
					last[n.Name] = hb
				}
			}
			time.Sleep(time.Second)
		}
		t.Logf("heartbeats per node while the webhook was down for 60s: %v", beats)
		for _, n := range nodes {
			if beats[n] < 3 {
				t.Errorf("node %s: only %d heartbeats in 60s with the webhook down", n, beats[n])
			}
		}
		if err := c.StartComponent("webhook"); err != nil {
			t.Fatal(err)
		}
		wh.WaitReady(t, 30*time.Second)
		framework.SetAnnotation(t, c, nodes[2], reclaimable.Annotation{CPUMilli: 7000, MemoryBytes: 3 << 30, Policy: "usage", WriteTime: time.Now()})
		assertInjected(t, waitHeartbeat(t, c, nodes[2], heartbeat), 7000, 3<<30)
	})

	t.Run("native oversell multiplies allocatable once, whatever writes status, and removing the ratio restores it", func(t *testing.T) {
		framework.MustPatchNode(t, c, nodes[2], map[string]any{"metadata": map[string]any{"labels": map[string]any{names.CPURatio: "1.5"}}})
		// Ten heartbeats (conditions-only patches carrying the stored, already
		// inflated allocatable) must not compound.
		for i := 0; i < 10; i++ {
			n := waitHeartbeat(t, c, nodes[2], heartbeat)
			if got := n.Status.Allocatable.Cpu().MilliValue(); got != 24000 {
				t.Fatalf("heartbeat %d: allocatable cpu %dm, want 24000m (16 x 1.5)", i+1, got)
			}
		}
		// A kubelet-like writer sends its freshly computed raw allocatable.
		// kwok's heartbeat can land between the read and the update: read
		// again on a conflict, as kubelet does.
		var n *corev1.Node
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.Client.CoreV1().Nodes().Get(ctx, nodes[2], metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("15")
			n, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Status.Allocatable.Cpu().MilliValue(); got != 22500 {
			t.Errorf("after a raw allocatable of 15 cores: %dm, want 22500m (15 x 1.5)", got)
		}
		if got := n.Status.Capacity.Cpu().MilliValue(); got != 16000 {
			t.Errorf("capacity changed to %dm", got)
		}
		framework.MustPatchNode(t, c, nodes[2], map[string]any{"metadata": map[string]any{"labels": map[string]any{names.CPURatio: nil}}})
		n = waitHeartbeat(t, c, nodes[2], heartbeat)
		if got := n.Status.Allocatable.Cpu().MilliValue(); got != 15000 {
			t.Errorf("after removing the ratio: allocatable cpu %dm, want the raw 15000m", got)
		}
		if _, ok := n.Annotations[webhook.OversellRecordAnnotation(names)]; ok {
			t.Error("oversell record left behind after removing the ratio")
		}
	})

	t.Run("--self-signed patches the caBundle and the apiserver calls it", func(t *testing.T) {
		ssPort, err := cluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		name := "kube-reclaim-webhook-self-signed"
		ss := webhook.MutatingWebhookConfiguration(name,
			webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", ssPort, webhook.Path), nil))
		if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, ss, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sr := framework.StartRole(t, c, "webhook-self-signed", "webhook", fmt.Sprintf("--listen-address=127.0.0.1:%d", ssPort),
			"--self-signed", "--webhook-configuration-name="+name, "--extra-sans=127.0.0.1", "--publisher-lease-name=")
		if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
			got, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, w := range got.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 {
					return false
				}
			}
			return true
		}); !ok {
			t.Fatal("caBundle not patched")
		}
		waitHeartbeat(t, c, nodes[0], heartbeat)
		if _, ok := framework.Poll(heartbeat, 500*time.Millisecond, func() bool {
			return sr.Metric(t, "kube_reclaim_webhook_review_duration_seconds_count") > 0
		}); !ok {
			t.Fatal("the apiserver never called the self-signed webhook")
		}
		assertInjected(t, waitHeartbeat(t, c, nodes[0], heartbeat), 3100, 2<<30)
	})
}
