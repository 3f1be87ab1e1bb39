package webhook

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
)

func webhookConfig(bundles ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
	cfg := MutatingWebhookConfiguration("kube-reclaim-webhook", ServiceClientConfig("kube-reclaim", "kube-reclaim-webhook", nil))
	one := cfg.Webhooks[0]
	cfg.Webhooks = nil
	for i, b := range bundles {
		w := *one.DeepCopy()
		w.Name = []string{"a.kube-reclaim.io", "b.kube-reclaim.io", "c.kube-reclaim.io"}[i]
		if b != "" {
			w.ClientConfig.CABundle = []byte(b)
		}
		cfg.Webhooks = append(cfg.Webhooks, w)
	}
	return cfg
}

func TestEnsureCABundlePatchesEveryWebhook(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if _, err := EnsureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", []byte("CA")); !apierrors.IsNotFound(err) {
		t.Fatalf("missing configuration: err = %v, want NotFound", err)
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhookConfig("", "old"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := EnsureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", []byte("CA"))
	if err != nil || !changed {
		t.Fatalf("first ensure: %v %v", changed, err)
	}
	got, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
	for _, w := range got.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("webhook %s caBundle %q", w.Name, w.ClientConfig.CABundle)
		}
	}
	if changed, err := EnsureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", []byte("CA")); err != nil || changed {
		t.Errorf("second ensure changed=%v err=%v, want no change", changed, err)
	}
}

func TestCABundleKeeperWaitsForTheConfigurationAndRepatchesResets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	certs, err := certauthority.NewSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	k := &caBundleKeeper{client: client.AdmissionregistrationV1(), name: "kube-reclaim-webhook", certs: certs,
		resync: 20 * time.Millisecond, retry: 5 * time.Millisecond}
	go k.run(ctx)
	time.Sleep(30 * time.Millisecond)
	if k.check() == nil {
		t.Fatal("ready before the configuration exists")
	}
	mwcs := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := mwcs.Create(ctx, webhookConfig(""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	bundle := func() string {
		cfg, err := mwcs.Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(cfg.Webhooks[0].ClientConfig.CABundle)
	}
	waitFor("the caBundle is patched", func() bool { return bundle() == string(certs.CABundle()) && k.check() == nil })

	cfg, _ := mwcs.Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
	cfg.Webhooks[0].ClientConfig.CABundle = []byte("reset by someone")
	if _, err := mwcs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the reset caBundle is patched again", func() bool { return bundle() == string(certs.CABundle()) })
}

const (
	testSecretNS   = "kube-reclaim"
	testSecretName = "kube-reclaim-webhook-ca"
)

// testSecret is the shared CA Secret with a 30-day CA, replaced 10 days
// before it expires, and a settable clock.
func testSecret(client *fake.Clientset, now *time.Time) *certauthority.Secret {
	s := certauthority.NewSecret(client.CoreV1(), testSecretNS, testSecretName)
	s.Validity, s.RotateBefore = 30*24*time.Hour, 10*24*time.Hour
	s.Now = func() time.Time { return *now }
	return s
}

// sharedReplica is one webhook replica's keeper on a shared CA Secret.
func sharedReplica(t *testing.T, client *fake.Clientset, now *time.Time) *caBundleKeeper {
	t.Helper()
	certs, err := certauthority.NewPendingSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &caBundleKeeper{client: client.AdmissionregistrationV1(), name: "kube-reclaim-webhook", certs: certs,
		secret: testSecret(client, now), resync: time.Minute}
}

func configBundle(t *testing.T, client *fake.Clientset) []byte {
	t.Helper()
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "kube-reclaim-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Webhooks[0].ClientConfig.CABundle
}

// trusted reports whether the replica's serving certificate verifies against bundle.
func trusted(t *testing.T, k *caBundleKeeper, bundle []byte, at time.Time) bool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("bundle is not PEM")
	}
	_, err := k.certs.Leaf().Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at})
	return err == nil
}

func TestReplicasSharingTheCASecretStayTrustedThroughARotation(t *testing.T) {
	ctx := context.Background()
	log := logrus.New()
	client := fake.NewClientset(webhookConfig(""))
	t0 := time.Now()
	nowA, nowB := t0, t0
	a, b := sharedReplica(t, client, &nowA), sharedReplica(t, client, &nowB)
	if a.certs.Check() == nil {
		t.Fatal("ready before it has a CA")
	}
	for _, k := range []*caBundleKeeper{a, b} {
		if err := k.sync(ctx, log); err != nil {
			t.Fatal(err)
		}
	}
	secret, err := client.CoreV1().Secrets(testSecretNS).Get(ctx, testSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secretBundle := secret.Data[certauthority.SecretBundleKey]
	if string(configBundle(t, client)) != string(secretBundle) {
		t.Fatal("caBundle differs from the Secret's ca.crt")
	}
	if !trusted(t, a, secretBundle, t0) || !trusted(t, b, secretBundle, t0) {
		t.Fatal("a replica's certificate is not trusted by the shared bundle")
	}
	if a.certs.Leaf().SerialNumber.Cmp(b.certs.Leaf().SerialNumber) == 0 {
		t.Error("both replicas serve the same certificate; each should issue its own")
	}
	oldBundle := configBundle(t, client)

	// Replica a sees the CA due and rotates it; b has not looked yet.
	nowA = t0.Add(21 * 24 * time.Hour)
	if err := a.sync(ctx, log); err != nil {
		t.Fatal(err)
	}
	bundle := configBundle(t, client)
	if cas, err := certutil.ParseCertsPEM(bundle); err != nil || len(cas) != 2 {
		t.Fatalf("caBundle during the rotation holds %d CAs (%v), want old and new", len(cas), err)
	}
	if !trusted(t, a, bundle, nowA) || !trusted(t, b, bundle, nowA) {
		t.Fatal("during the rotation a replica's certificate is not trusted: its calls would fail")
	}
	if trusted(t, a, oldBundle, nowA) {
		t.Fatal("replica a still serves from the old CA")
	}
	// b, with the old bundle in hand, must not take the new CA out again.
	if _, err := ensureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", oldBundle, true); !errors.Is(err, errStaleCA) {
		t.Errorf("writing the pre-rotation bundle: err %v, want errStaleCA", err)
	}
	if string(configBundle(t, client)) != string(bundle) {
		t.Fatal("a stale replica replaced the rotated caBundle")
	}
	// Positive control: without the guard the stale write goes through.
	if changed, err := EnsureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", oldBundle); err != nil || !changed {
		t.Fatalf("unguarded write: changed %v err %v", changed, err)
	}
	if _, err := EnsureCABundle(ctx, client.AdmissionregistrationV1(), "kube-reclaim-webhook", bundle); err != nil {
		t.Fatal(err)
	}

	nowB = nowA
	if err := b.sync(ctx, log); err != nil {
		t.Fatal(err)
	}
	if trusted(t, b, oldBundle, nowB) || !trusted(t, b, bundle, nowB) {
		t.Error("replica b did not move to the rotated CA")
	}
	if string(configBundle(t, client)) != string(bundle) {
		t.Error("caBundle changed after both replicas moved")
	}
}
