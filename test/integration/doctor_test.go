package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestDoctorChecksTheShippedOverlay applies the default overlay as shipped
// to a real API server (kwok nodes run its pods, metrics-server serves
// metrics.k8s.io) and runs kubectl reclaim doctor against it: every check
// passes; with one ValidatingAdmissionPolicyBinding deleted doctor fails,
// naming the binding, and nothing else.
//
// What no process of this test serves is stood in for as the roles would
// leave it: the webhook's CA Secret and the caBundle it patches in (the
// webhook configuration made inert, since no webhook answers at the kwok
// pods' addresses), the publisher's Lease and its node annotations.
func TestDoctorChecksTheShippedOverlay(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{})
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}

	// Nodes with fresh annotations and the publisher's Lease, written
	// before the admission policies keep everyone but the publisher from
	// writing the annotation.
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "doctor", CPU: resource.MustParse("8"), Memory: resource.MustParse("32Gi")}, time.Minute)
	for _, n := range nodes {
		framework.SetAnnotation(t, c, n, reclaimable.Annotation{CPUMilli: 1000, MemoryBytes: 1 << 30, Policy: "request", WriteTime: time.Now().UTC()})
	}
	framework.RenewPublisherLease(t, c)

	caPEM, caSecret := doctorWebhookCA(t)
	var binding, policy string
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.RESTConfig())))
	for _, obj := range objs {
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration":
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cfg); err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kube-reclaim.test/never": "true"}}
				cfg.Webhooks[i].ClientConfig.CABundle = caPEM
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			obj = &unstructured.Unstructured{Object: u}
			obj.SetAPIVersion(admissionregistrationv1.SchemeGroupVersion.String())
			obj.SetKind("MutatingWebhookConfiguration")
		case "ValidatingAdmissionPolicyBinding":
			if binding == "" {
				binding = obj.GetName()
				policy, _, _ = unstructured.NestedString(obj.Object, "spec", "policyName")
			}
		}
		applyObject(ctx, t, c, mapper, obj)
	}
	if binding == "" {
		t.Fatal("the default overlay renders no ValidatingAdmissionPolicyBinding")
	}
	caSecret.Namespace = "kube-reclaim"
	if _, err := c.Client.CoreV1().Secrets(caSecret.Namespace).Create(ctx, caSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	doctor := func(args ...string) (*kubectlreclaim.DoctorReport, int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := kubectlreclaim.Main(ctx, append([]string{"doctor", "--kubeconfig=" + c.Kubeconfig()}, args...),
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		if len(args) > 0 && args[0] == "-o" {
			var r kubectlreclaim.DoctorReport
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("doctor -o json: %v\n%s\n%s", err, out.String(), errOut.String())
			}
			return &r, code, errOut.String()
		}
		return nil, code, out.String() + errOut.String()
	}
	summary := func(r *kubectlreclaim.DoctorReport) string {
		var b strings.Builder
		for _, ch := range r.Checks {
			fmt.Fprintf(&b, "  %s %s: %s\n", ch.Name, ch.Status, ch.Message)
		}
		return b.String()
	}

	t.Run("passes on the install", func(t *testing.T) {
		// The Deployments' pods start on the kwok nodes and metrics-server
		// scrapes them within a minute or so.
		var r *kubectlreclaim.DoctorReport
		var code int
		if _, done := framework.Poll(3*time.Minute, 2*time.Second, func() bool {
			r, code, _ = doctor("-o", "json")
			return code == 0 && r.Warnings == 0
		}); !done {
			t.Fatalf("doctor exit %d, %d failed, %d warnings:\n%s", code, r.Failed, r.Warnings, summary(r))
		}
		t.Logf("doctor on the install:\n%s", summary(r))
		for _, want := range []string{"kubernetes-version", "admission-policy/" + policy, "webhook/kube-reclaim-webhook", "service/kube-reclaim-webhook",
			"deployment/kube-reclaim-scheduler", "publisher-lease", "metrics-server", "node-annotations"} {
			if !strings.Contains(summary(r), "  "+want+" ok: ") {
				t.Errorf("no passing check %s:\n%s", want, summary(r))
			}
		}
		if m := summary(r); !strings.Contains(m, "carries the CA of Secret kube-reclaim/kube-reclaim-webhook-ca") {
			t.Errorf("the caBundle was not checked against the webhook's CA:\n%s", m)
		}
	})

	t.Run("fails naming a deleted policy binding", func(t *testing.T) {
		if err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r, code, _ := doctor("-o", "json")
		t.Logf("doctor without binding %s:\n%s", binding, summary(r))
		if code != 1 || r.Failed != 1 {
			t.Errorf("doctor exit %d with %d failed, want 1 and 1:\n%s", code, r.Failed, summary(r))
		}
		for _, ch := range r.Checks {
			failing := ch.Name == "admission-policy/"+policy
			switch {
			case failing && (ch.Status != kubectlreclaim.CheckFail || !strings.Contains(ch.Message, "ValidatingAdmissionPolicyBinding "+binding+" is missing")):
				t.Errorf("%s: %s: %s; want a failure naming the binding", ch.Name, ch.Status, ch.Message)
			case !failing && ch.Status == kubectlreclaim.CheckFail:
				t.Errorf("%s fails too: %s", ch.Name, ch.Message)
			}
		}
		// The table a user reads says it too.
		_, code, table := doctor()
		if code != 1 || !strings.Contains(table, "ValidatingAdmissionPolicyBinding "+binding+" is missing") || !strings.Contains(table, "error: 1 of ") {
			t.Errorf("doctor exit %d:\n%s", code, table)
		}
	})
}

// applyObject applies obj server-side as admin, as kubectl apply
// --server-side does.
func applyObject(ctx context.Context, t *testing.T, c *cluster.Cluster, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.PatchOptions{FieldManager: "doctor-test", Force: ptr.To(true)}
	ri := c.Dynamic.Resource(mapping.Resource)
	if ns := obj.GetNamespace(); ns != "" {
		_, err = ri.Namespace(ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	} else {
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	}
	if err != nil {
		t.Fatalf("applying %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

// doctorWebhookCA is what kube-reclaim webhook --self-signed leaves behind:
// a CA in a kubernetes.io/tls Secret and the caBundle carrying it.
func doctorWebhookCA(t *testing.T) ([]byte, *corev1.Secret) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "doctor-test-ca"}, key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := certutil.EncodeCertificates(ca)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-reclaim-webhook-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: caPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM}}
}
