package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// What deploy/cert-manager names: the webhook's Certificate, the Secret
// it writes and the Service the webhook configuration calls.
const (
	cmNamespace   = "kube-reclaim"
	cmCertificate = "kube-reclaim-webhook"
	cmSecret      = "kube-reclaim-webhook-tls"
	cmService     = "kube-reclaim-webhook"
	// The test's renewal schedule, patched onto the shipped Certificate:
	// a certificate lives 90s and is renewed 60s before it expires, so 30s
	// after it was issued. cert-manager's own webhook (not run here) would
	// refuse a duration under 1h; its controllers do not.
	cmShortDuration    = 90 * time.Second
	cmShortRenewBefore = 60 * time.Second
)

// TestCertManagerServesIssuesInjectsAndRenewsTheWebhookCertificate applies
// the TLS objects of deploy/cert-manager (its Issuers and Certificates, the
// webhook Service and MutatingWebhookConfiguration) to a cluster where
// cert-manager's controller and CA injector, built from the cert-manager
// module at the pinned release, run as processes with the release's CRDs.
// The webhook runs as a process with the shipped Deployment's arguments and
// the Secret's tls.crt and tls.key in a directory laid out and swapped the
// way kubelet projects a Secret volume (..data symlink). Shown: the webhook
// serves the certificate cert-manager issued, with the chain and name the
// API server checks; the injector fills the caBundle of both webhooks; a
// node's own status write (as system:node:<name>) is mutated through it;
// and renewals, on a spec change and by time, are served by the same
// process.
//
// The Service is an ExternalName for localhost and the webhook
// configuration's port the process's (the API server refuses loopback
// endpoints); everything TLS depends on (names, Secret, annotation, issuer
// chain) is as shipped.
func TestCertManagerServesIssuesInjectsAndRenewsTheWebhookCertificate(t *testing.T) {
	ctx := context.Background()
	testStart := time.Now()
	cm, err := cluster.EnsureCertManager(ctx, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cluster.EnsureKubectl(ctx, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true,
		AuditPolicy: framework.NodeWritesAuditPolicy})
	nodes := framework.AddReadyNodes(t, c, 1, cluster.NodeSpec{NamePrefix: "cm", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)
	node := nodes[0]
	kc := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// cert-manager as the release installs it: its CRDs, then its
	// controller and CA injector.
	crdArgs := []string{"apply", "--server-side"}
	for _, f := range cm.CRDs {
		crdArgs = append(crdArgs, "-f", f)
	}
	kc(t, crdArgs...)
	kc(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io",
		"crd/certificaterequests.cert-manager.io")
	for name, bin := range map[string]string{"cert-manager-controller": cm.Controller, "cert-manager-cainjector": cm.CAInjector} {
		if err := c.StartProcess(name, bin, "--kubeconfig="+c.Kubeconfig()); err != nil {
			t.Fatal(err)
		}
	}

	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	manifest := certManagerTLSObjects(t, port)
	work := t.TempDir()
	manifestFile := filepath.Join(work, "cert-manager-tls.yaml")
	if err := os.WriteFile(manifestFile, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	t.Logf("kubectl apply: %s", strings.TrimSpace(kc(t, "apply", "-f", manifestFile)))

	// Issued: the Certificate Ready and its Secret holding a key pair.
	var secret *corev1.Secret
	took, ok := framework.Poll(2*time.Minute, 250*time.Millisecond, func() bool {
		s, err := c.Client.CoreV1().Secrets(cmNamespace).Get(ctx, cmSecret, metav1.GetOptions{})
		if err != nil || len(s.Data["tls.crt"]) == 0 || len(s.Data["ca.crt"]) == 0 {
			return false
		}
		secret = s
		return certificateReady(ctx, c, cmCertificate)
	})
	if !ok {
		t.Fatalf("Certificate %s not Ready with Secret %s after %s:\n%s\ncontroller:\n%s", cmCertificate, cmSecret, took,
			kc(t, "-n", cmNamespace, "get", "issuers,certificates,certificaterequests", "-o", "wide"), c.Process("cert-manager-controller").Tail(30))
	}
	issued := leafOf(t, secret.Data["tls.crt"])
	t.Logf("issued %s after apply: serial %x, %s, not after %s, issuer %q", took.Round(time.Millisecond), issued.SerialNumber,
		strings.Join(issued.DNSNames, ","), issued.NotAfter.Format(time.RFC3339), issued.Issuer.CommonName)

	// The webhook, with the shipped Deployment's arguments and the Secret as
	// kubelet would mount it.
	tlsDir := filepath.Join(work, "tls")
	if err := projectSecret(tlsDir, secret); err != nil {
		t.Fatal(err)
	}
	deployed, err := stack.LoadDeployed("cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(work, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(deployed.Policy), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.RenewPublisherLease(t, c) // the deployed --publisher-lease-name; no publisher runs here
	health, serving, err := stack.ServingFlags(c)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"webhook", "--kubeconfig=" + c.Kubeconfig()}, deployed.Args[stack.Webhook]...), serving...)
	args = append(args, fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--config="+policyFile,
		"--tls-cert-file="+filepath.Join(tlsDir, "tls.crt"), "--tls-private-key-file="+filepath.Join(tlsDir, "tls.key"))
	if err := c.StartProcessWithEnv(stack.Webhook, framework.KubeReclaim(t), deployed.Env[stack.Webhook], args...); err != nil {
		t.Fatal(err)
	}
	framework.AttachRole(c, stack.Webhook, health).WaitReady(t, time.Minute)
	pid := c.Process(stack.Webhook).PID()
	t.Logf("kube-reclaim %s (pid %d)", strings.Join(args, " "), pid)

	var caBundle []byte
	t.Run("the CA injector fills the caBundle of every webhook with the issuing CA", func(t *testing.T) {
		var bundles [][]byte
		took, ok := framework.Poll(2*time.Minute, 250*time.Millisecond, func() bool {
			cfg, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, deployed.WebhookConfigName, metav1.GetOptions{})
			if err != nil || len(cfg.Webhooks) == 0 {
				return false
			}
			bundles = bundles[:0]
			for _, w := range cfg.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 {
					return false
				}
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
			return true
		})
		if !ok {
			t.Fatalf("caBundle still empty %s after apply:\n%s", took, c.Process("cert-manager-cainjector").Tail(30))
		}
		for i, b := range bundles {
			if !bytes.Equal(b, secret.Data["ca.crt"]) {
				t.Errorf("webhook %d: caBundle is not the Secret's ca.crt", i)
			}
		}
		caBundle = bundles[0]
		t.Logf("caBundle of %d webhooks filled %s after apply (CA %q)", len(bundles), time.Since(applied).Round(time.Millisecond),
			leafOf(t, caBundle).Subject.CommonName)
	})
	if caBundle == nil {
		t.FailNow()
	}

	t.Run("the webhook serves the certificate cert-manager issued, verified as the API server verifies it", func(t *testing.T) {
		served, err := servedCert(port, caBundle)
		if err != nil {
			t.Fatal(err)
		}
		assertSameCert(t, served, issued)
		t.Logf("served serial %x, public key of the Secret's tls.key, verified against the caBundle for %s.%s.svc",
			served.SerialNumber, cmService, cmNamespace)
	})

	t.Run("a node's own status write is mutated through the webhook", func(t *testing.T) {
		framework.SetAnnotation(t, c, node, reclaimable.Annotation{CPUMilli: 3000, MemoryBytes: 2 << 30, Policy: "usage", WriteTime: time.Now()})
		nodeCfg, err := c.NodeRESTConfig(node)
		if err != nil {
			t.Fatal(err)
		}
		kubelet, err := kubernetes.NewForConfig(nodeCfg)
		if err != nil {
			t.Fatal(err)
		}
		tried := time.Now()
		// The API server loads the injected caBundle through an informer:
		// until then its calls fail and, failurePolicy Ignore, the write
		// passes unmutated. Each try removes the values, as a kubelet
		// re-registering would.
		var got *corev1.Node
		took, ok := framework.Poll(time.Minute, time.Second, func() bool {
			patch := fmt.Sprintf(`{"status":{"capacity":{%q:null,%q:null},"allocatable":{%q:null,%q:null}}}`,
				names.CPU, names.Memory, names.CPU, names.Memory)
			n, err := kubelet.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Logf("status patch as system:node:%s: %v", node, err)
				return false
			}
			got = n
			cpu, mem := n.Status.Allocatable[names.CPU], n.Status.Allocatable[names.Memory]
			return cpu.Value() == 3000 && mem.Value() == 2<<30
		})
		if !ok {
			t.Fatalf("status patches of system:node:%s not mutated within %s: allocatable %v\nwebhook:\n%s", node, took,
				got.Status.Allocatable, c.Process(stack.Webhook).Tail(20))
		}
		// Nothing else writes these values here (no publisher runs): the
		// audit log shows whose call put them back.
		configs := map[string]bool{deployed.WebhookConfigName: true}
		var via string
		if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
			for _, e := range framework.NodeWrites(t, c, tried.Add(-time.Second), time.Now()) {
				if e.ObjectRef.Subresource == "status" && e.ObjectRef.Name == node && e.User.Username == "system:node:"+node &&
					e.ResponseStatus.Code < 300 && e.MutatedBy(configs) != "" {
					via = e.MutatedBy(configs)
				}
			}
			return via != ""
		}); !ok {
			t.Errorf("no status write of system:node:%s in the audit log through %s", node, deployed.WebhookConfigName)
		}
		cpu, mem := got.Status.Allocatable[names.CPU], got.Status.Allocatable[names.Memory]
		t.Logf("status patch by system:node:%s removing %s and %s came back with %s=%s %s=%s through %s (%s after the first try)", node,
			names.CPU, names.Memory, names.CPU, cpu.String(), names.Memory, mem.String(), via, took.Round(time.Millisecond))
	})

	t.Run("renewals are served by the same process: on a spec change and by time", func(t *testing.T) {
		patch := fmt.Sprintf(`{"spec":{"duration":%q,"renewBefore":%q}}`, cmShortDuration, cmShortRenewBefore)
		kc(t, "-n", cmNamespace, "patch", "certificate", cmCertificate, "--type=merge", "-p", patch)
		patched := time.Now()
		t.Logf("patched Certificate %s: %s", cmCertificate, patch)
		prev := issued
		for _, r := range []struct {
			cause, since string
			from         func() time.Time
		}{
			{"re-issued on the spec change", "the patch", func() time.Time { return patched }},
			{"renewed by time", "the previous certificate's notBefore", func() time.Time { return prev.NotBefore }},
		} {
			from := r.from()
			renewed, inSecret, servedAfter := waitRenewedAndServed(t, c, tlsDir, port, caBundle, prev)
			t.Logf("%s: serial %x in the Secret %s after %s, served %s after the Secret changed; lives %s, not after %s",
				r.cause, renewed.SerialNumber, inSecret.Sub(from).Round(100*time.Millisecond), r.since,
				servedAfter.Round(time.Millisecond), renewed.NotAfter.Sub(renewed.NotBefore), renewed.NotAfter.Format(time.RFC3339))
			if d := renewed.NotAfter.Sub(renewed.NotBefore); d > cmShortDuration+time.Minute {
				t.Errorf("renewed certificate lives %s, want the patched %s", d, cmShortDuration)
			}
			prev = renewed
		}
		p := c.Process(stack.Webhook)
		if !p.Running() || p.PID() != pid {
			t.Errorf("the webhook process changed: pid %d, running %v; started as %d", p.PID(), p.Running(), pid)
		}
		t.Logf("the webhook served both renewals as pid %d, never restarted", pid)
	})
	t.Logf("TestCertManager took %s", time.Since(testStart).Round(time.Second))
}

// certManagerTLSObjects renders deploy/cert-manager and keeps the objects of
// its TLS path: the namespace, cert-manager's Issuers and Certificates, the
// webhook's Service and MutatingWebhookConfiguration. The Service becomes an
// ExternalName for localhost and the configuration's port the local
// webhook's: the API server dials localhost:<port> and still checks the
// certificate against <service>.<namespace>.svc.
func certManagerTLSObjects(t *testing.T, port int) []byte {
	t.Helper()
	objs, err := deploy.Objects("cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	kinds := map[string]int{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "Issuer", "Certificate":
		case "Service":
			if o.GetName() != cmService {
				continue
			}
			o.Object["spec"] = map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": int64(port)}}}
		case "MutatingWebhookConfiguration":
			if err := setWebhookPorts(o, port); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		kinds[o.GetKind()]++
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if kinds["Issuer"] == 0 || kinds["Certificate"] == 0 || kinds["MutatingWebhookConfiguration"] != 1 || kinds["Service"] != 1 {
		t.Fatalf("deploy/cert-manager renders %v, want Issuers, Certificates, one Service %s and one webhook configuration", kinds, cmService)
	}
	return bytes.Join(out, []byte("---\n"))
}

func setWebhookPorts(o *unstructured.Unstructured, port int) error {
	whs, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	for _, w := range whs {
		if err := unstructured.SetNestedField(w.(map[string]any), int64(port), "clientConfig", "service", "port"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(o.Object, whs, "webhooks")
}

var certificatesGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

func certificateReady(ctx context.Context, c *cluster.Cluster, name string) bool {
	u, err := c.Dynamic.Resource(certificatesGVR).Namespace(cmNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cd := range conds {
		m, _ := cd.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// projectSecret writes the Secret's keys into dir the way kubelet updates a
// Secret volume: into a fresh timestamped directory, then one rename of the
// ..data symlink, so that a reader never sees a new tls.crt beside an old
// tls.key. The key files are symlinks through ..data.
func projectSecret(dir string, s *corev1.Secret) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ts := ".." + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		return err
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), v, 0o600); err != nil {
			return err
		}
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "..data"))
}

// waitRenewedAndServed waits for the Secret to hold a certificate other than
// prev, projects it as kubelet would, and waits for the webhook to serve
// it. It returns the new certificate, when the Secret was seen changed and
// how long after that the webhook served it.
func waitRenewedAndServed(t *testing.T, c *cluster.Cluster, tlsDir string, port int, caBundle []byte, prev *x509.Certificate) (*x509.Certificate, time.Time, time.Duration) {
	t.Helper()
	ctx := context.Background()
	var secret *corev1.Secret
	var renewed *x509.Certificate
	took, ok := framework.Poll(3*time.Minute, 250*time.Millisecond, func() bool {
		s, err := c.Client.CoreV1().Secrets(cmNamespace).Get(ctx, cmSecret, metav1.GetOptions{})
		if err != nil {
			return false
		}
		crt, err := parseLeaf(s.Data["tls.crt"])
		if err != nil || crt.SerialNumber.Cmp(prev.SerialNumber) == 0 {
			return false
		}
		secret, renewed = s, crt
		return true
	})
	if !ok {
		t.Fatalf("the Secret still holds serial %x after %s:\n%s", prev.SerialNumber, took, c.Process("cert-manager-controller").Tail(30))
	}
	seen := time.Now()
	if err := projectSecret(tlsDir, secret); err != nil {
		t.Fatal(err)
	}
	var served *x509.Certificate
	took, ok = framework.Poll(time.Minute, 250*time.Millisecond, func() bool {
		crt, err := servedCert(port, caBundle)
		if err != nil {
			return false
		}
		served = crt
		return crt.SerialNumber.Cmp(renewed.SerialNumber) == 0
	})
	if !ok {
		t.Fatalf("the webhook still serves serial %x %s after the Secret changed to %x", served.SerialNumber, took, renewed.SerialNumber)
	}
	assertSameCert(t, served, renewed)
	return renewed, seen, time.Since(seen)
}

// servedCert does the TLS handshake the API server does with the webhook:
// trusting the caBundle alone, for the Service's name.
func servedCert(port int, caBundle []byte) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return nil, fmt.Errorf("caBundle holds no certificate")
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{
		RootCAs: roots, ServerName: cmService + "." + cmNamespace + ".svc", MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func assertSameCert(t *testing.T, served, want *x509.Certificate) {
	t.Helper()
	if served.SerialNumber.Cmp(want.SerialNumber) != 0 {
		t.Errorf("served serial %x, the Secret holds %x", served.SerialNumber, want.SerialNumber)
	}
	if !bytes.Equal(served.RawSubjectPublicKeyInfo, want.RawSubjectPublicKeyInfo) {
		t.Error("served public key differs from the Secret's certificate")
	}
}

func leafOf(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	crt, err := parseLeaf(p)
	if err != nil {
		t.Fatal(err)
	}
	return crt
}

func parseLeaf(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return x509.ParseCertificate(b.Bytes)
}

// testLog sends build progress to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
