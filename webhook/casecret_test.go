package webhook

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

const (
	testSecretNS   = "kube-reclaim"
	testSecretName = "kube-reclaim-webhook-ca"
)

var (
	secretsResource = schema.GroupResource{Resource: "secrets"}
	secretsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// testCASecret is a caSecret with a short validity and a settable clock.
func testCASecret(client *fake.Clientset, now *time.Time) *caSecret {
	s := newCASecret(client.CoreV1(), testSecretNS, testSecretName)
	s.validity, s.rotateBefore = 30*24*time.Hour, 10*24*time.Hour
	s.now = func() time.Time { return *now }
	return s
}

func storedSecret(t *testing.T, client *fake.Clientset) *corev1.Secret {
	t.Helper()
	sec, err := client.CoreV1().Secrets(testSecretNS).Get(context.Background(), testSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// verbs lists the verbs of the recorded actions on secrets.
func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "secrets" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func bundleCerts(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	return certs
}

func TestCASecretIsCreatedWhenAbsent(t *testing.T) {
	client := fake.NewClientset()
	now := time.Now()
	ca, err := testCASecret(client, &now).ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := verbs(client); strings.Join(got, ",") != "get,create" {
		t.Errorf("actions %v, want get then create", got)
	}
	sec := storedSecret(t, client)
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("type %q, want %q", sec.Type, corev1.SecretTypeTLS)
	}
	stored, err := parseCASecret(sec)
	if err != nil {
		t.Fatalf("the created Secret does not parse: %v", err)
	}
	if !stored.cert.Equal(ca.cert) || string(stored.bundle) != string(ca.bundle) {
		t.Error("ensure returned another CA than the one it stored")
	}
	if certs := bundleCerts(t, ca.bundle); len(certs) != 1 || !certs[0].Equal(ca.cert) {
		t.Errorf("a new Secret's bundle holds %d certificates, want just its CA", len(certs))
	}
	// Certificates keep whole seconds.
	if d := ca.cert.NotAfter.Sub(now) - 30*24*time.Hour; !ca.cert.IsCA || d < -time.Second || d > time.Second {
		t.Errorf("CA: isCA %v, valid until %s (want now + 30 days)", ca.cert.IsCA, ca.cert.NotAfter)
	}
}

func TestCASecretIsReusedWhenPresent(t *testing.T) {
	client := fake.NewClientset()
	now := time.Now()
	first, err := testCASecret(client, &now).ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	now = now.Add(15 * 24 * time.Hour) // 15 of 30 days left: not yet due
	second, err := testCASecret(client, &now).ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !second.cert.Equal(first.cert) || string(second.bundle) != string(first.bundle) {
		t.Error("a second replica got another CA")
	}
	if got := verbs(client); strings.Join(got, ",") != "get" {
		t.Errorf("reusing the Secret made %v, want a single get", got)
	}
}

func TestCASecretCreateRaceEndsWithTheWinnersCA(t *testing.T) {
	t.Run("losing the create re-reads the Secret the winner wrote", func(t *testing.T) {
		client := fake.NewClientset()
		now := time.Now()
		var winner *sharedCA
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if winner != nil {
				return false, nil, nil
			}
			// Another replica creates it between this one's get and create.
			ca, obj, err := testCASecret(client, &now).generate(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			winner = ca
			if err := client.Tracker().Add(obj); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewAlreadyExists(secretsResource, testSecretName)
		})
		got, err := testCASecret(client, &now).ensure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if winner == nil || !got.cert.Equal(winner.cert) {
			t.Fatal("the replica that lost the create does not use the winner's CA")
		}
		if got := verbs(client); strings.Join(got, ",") != "get,create,get" {
			t.Errorf("actions %v, want get, create (lost), get", got)
		}
	})

	t.Run("replicas that all find no Secret all end with the one stored", func(t *testing.T) {
		client := fake.NewClientset()
		now := time.Now()
		const replicas = 8
		// Every replica's first Get returns before any replica creates.
		var allRead sync.WaitGroup
		allRead.Add(replicas)
		got := make([]*sharedCA, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := testCASecret(client, &now)
				s.client = firstGetBarrier{SecretsGetter: client.CoreV1(), barrier: &allRead, once: &sync.Once{}}
				got[i], errs[i] = s.ensure(context.Background())
			}()
		}
		wg.Wait()
		stored, err := parseCASecret(storedSecret(t, client))
		if err != nil {
			t.Fatal(err)
		}
		creates := 0
		for _, v := range verbs(client) {
			if v == "create" {
				creates++
			}
		}
		if creates != replicas {
			t.Fatalf("%d create attempts, want %d: the replicas did not race", creates, replicas)
		}
		for i := range replicas {
			if errs[i] != nil {
				t.Fatalf("replica %d: %v", i, errs[i])
			}
			if !got[i].cert.Equal(stored.cert) {
				t.Errorf("replica %d serves from another CA than the stored one", i)
			}
		}
	})
}

// firstGetBarrier holds a replica's first Get of the Secret until every
// replica has made its own.
type firstGetBarrier struct {
	corev1client.SecretsGetter
	barrier *sync.WaitGroup
	once    *sync.Once
}

func (b firstGetBarrier) Secrets(ns string) corev1client.SecretInterface {
	return barrierSecrets{SecretInterface: b.SecretsGetter.Secrets(ns), b: b}
}

type barrierSecrets struct {
	corev1client.SecretInterface
	b firstGetBarrier
}

func (s barrierSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	sec, err := s.SecretInterface.Get(ctx, name, opts)
	s.b.once.Do(func() {
		s.b.barrier.Done()
		s.b.barrier.Wait()
	})
	return sec, err
}

func TestCAIsRotatedBeforeExpiryKeepingThePreviousCAInTheBundle(t *testing.T) {
	client := fake.NewClientset()
	t0 := time.Now()
	now := t0
	s := testCASecret(client, &now)
	first, err := s.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	now = t0.Add(19 * 24 * time.Hour) // 11 days left: not due
	if ca, err := s.ensure(context.Background()); err != nil || !ca.cert.Equal(first.cert) {
		t.Fatalf("rotated with 11 of 30 days left (err %v)", err)
	}

	now = t0.Add(21 * 24 * time.Hour) // 9 days left: due
	second, err := s.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if second.cert.Equal(first.cert) {
		t.Fatal("not rotated with 9 of 30 days left")
	}
	certs := bundleCerts(t, second.bundle)
	if len(certs) != 2 || !certs[0].Equal(second.cert) || !certs[1].Equal(first.cert) {
		t.Fatalf("bundle after rotation holds %d certificates, want the new CA then the previous one", len(certs))
	}
	if stored, err := parseCASecret(storedSecret(t, client)); err != nil || !stored.cert.Equal(second.cert) {
		t.Fatalf("the Secret does not hold the rotated CA (err %v)", err)
	}
	// Another replica at the same moment reuses the new CA.
	client.ClearActions()
	if ca, err := testCASecret(client, &now).ensure(context.Background()); err != nil || !ca.cert.Equal(second.cert) {
		t.Fatalf("a second replica did not reuse the rotated CA (err %v)", err)
	}
	if got := verbs(client); strings.Join(got, ",") != "get" {
		t.Errorf("second replica made %v after the rotation, want a single get", got)
	}

	// The next rotation drops the first CA, expired by then.
	now = t0.Add(42 * 24 * time.Hour)
	third, err := s.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	certs = bundleCerts(t, third.bundle)
	if len(certs) != 2 || !certs[0].Equal(third.cert) || !certs[1].Equal(second.cert) {
		t.Errorf("bundle after the second rotation holds %d certificates, want the newest two (the expired first CA dropped)", len(certs))
	}
}

func TestCARotationConflictReReadsInsteadOfRotatingTwice(t *testing.T) {
	client := fake.NewClientset()
	t0 := time.Now()
	now := t0
	if _, err := testCASecret(client, &now).ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(25 * 24 * time.Hour)
	var other *sharedCA
	// The fake clientset does not check resourceVersion: play the apiserver
	// refusing this replica's update because another replica rotated first.
	client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if other != nil {
			return false, nil, nil
		}
		// The clientset's lock is held here: use the tracker.
		o, err := client.Tracker().Get(secretsGVR, testSecretNS, testSecretName)
		if err != nil {
			t.Fatal(err)
		}
		stored := o.(*corev1.Secret)
		prev, err := parseCASecret(stored)
		if err != nil {
			t.Fatal(err)
		}
		ca, obj, err := testCASecret(client, &now).generate(stored, prev)
		if err != nil {
			t.Fatal(err)
		}
		other = ca
		if err := client.Tracker().Update(secretsGVR, obj, testSecretNS); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(secretsResource, testSecretName, nil)
	})
	client.ClearActions()
	got, err := testCASecret(client, &now).ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if other == nil || !got.cert.Equal(other.cert) {
		t.Fatal("after a conflict the replica does not use the CA the other replica rotated to")
	}
	if got := verbs(client); strings.Join(got, ",") != "get,update,get" {
		t.Errorf("actions %v, want get, update (conflict), get", got)
	}
}

func TestMalformedCASecretIsAClearErrorAndLeftAlone(t *testing.T) {
	valid := func(t *testing.T) *corev1.Secret {
		now := time.Now()
		_, obj, err := testCASecret(fake.NewClientset(), &now).generate(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	other := func(t *testing.T) *corev1.Secret { return valid(t) }
	for _, c := range []struct {
		name   string
		breakS func(t *testing.T, s *corev1.Secret)
		want   string
	}{
		{"keys missing", func(_ *testing.T, s *corev1.Secret) {
			delete(s.Data, CASecretKeyKey)
			delete(s.Data, CASecretBundleKey)
		}, "no [tls.key ca.crt] in the data"},
		{"certificate not PEM", func(_ *testing.T, s *corev1.Secret) { s.Data[CASecretCertKey] = []byte("garbage") },
			"tls.crt and tls.key are not a matching certificate and key"},
		{"key of another CA", func(t *testing.T, s *corev1.Secret) { s.Data[CASecretKeyKey] = other(t).Data[CASecretKeyKey] },
			"tls.crt and tls.key are not a matching certificate and key"},
		{"bundle not PEM", func(_ *testing.T, s *corev1.Secret) { s.Data[CASecretBundleKey] = []byte("garbage") },
			"ca.crt: "},
		{"bundle without the CA", func(t *testing.T, s *corev1.Secret) { s.Data[CASecretBundleKey] = other(t).Data[CASecretBundleKey] },
			"ca.crt does not contain the CA of tls.crt"},
		{"certificate not a CA", func(t *testing.T, s *corev1.Secret) {
			// A serving certificate with its key is a matching pair, but no CA.
			certs, err := NewSelfSigned([]string{"127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			cert, err := certs.GetCertificate(nil)
			if err != nil {
				t.Fatal(err)
			}
			key, err := keyutil.MarshalPrivateKeyToPEM(cert.PrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			crt, err := certutil.EncodeCertificates(certs.Leaf())
			if err != nil {
				t.Fatal(err)
			}
			s.Data[CASecretCertKey], s.Data[CASecretKeyKey] = crt, key
		}, "is not a CA certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sec := valid(t)
			c.breakS(t, sec)
			client := fake.NewClientset(sec)
			now := time.Now()
			_, err := testCASecret(client, &now).ensure(context.Background())
			if err == nil {
				t.Fatal("a malformed Secret was accepted")
			}
			for _, want := range []string{"Secret kube-reclaim/kube-reclaim-webhook-ca", c.want, "delete it to have a new CA generated"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if got := verbs(client); strings.Join(got, ",") != "get" {
				t.Errorf("malformed Secret: actions %v, want only get (never overwritten)", got)
			}
		})
	}
}

// sharedReplica is one webhook replica's keeper on a shared CA Secret.
func sharedReplica(t *testing.T, client *fake.Clientset, now *time.Time) *caBundleKeeper {
	t.Helper()
	certs, err := newPendingSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &caBundleKeeper{client: client.AdmissionregistrationV1(), name: "kube-reclaim-webhook", certs: certs,
		secret: testCASecret(client, now), resync: time.Minute}
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
	secretBundle := storedSecret(t, client).Data[CASecretBundleKey]
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
	if n := len(bundleCerts(t, bundle)); n != 2 {
		t.Fatalf("caBundle during the rotation holds %d CAs, want old and new", n)
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

func TestValidateCASecretFlags(t *testing.T) {
	testValidate(t, []validateCase{
		{name: "shared CA", set: func(o *Options) { o.SelfSigned, o.CASecretName = true, "kube-reclaim-webhook-ca" }},
		{name: "in-memory CA", set: func(o *Options) { o.SelfSigned = true }},
		{name: "ignored without --self-signed", set: func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CASecretName, o.CASecretNamespace = "c", "k", "Not_A_Name", ""
		}},
		{name: "bad names reported together", set: func(o *Options) {
			o.SelfSigned, o.CASecretName, o.CASecretNamespace, o.ExtraSANs = true, "Not_A_Name", "", []string{"not a name!"}
		}, wants: []string{"--ca-secret-name \"Not_A_Name\"", "--ca-secret-namespace \"\"", "--extra-sans"}},
	})
}
