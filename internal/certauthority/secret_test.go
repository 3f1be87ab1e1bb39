package certauthority

import (
	"context"
	"crypto/x509"
	"strings"
	"sync"
	"testing"
	"time"

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

// testSecret is a Secret with a short validity and a settable clock.
func testSecret(client *fake.Clientset, now *time.Time) *Secret {
	s := NewSecret(client.CoreV1(), testSecretNS, testSecretName)
	s.Validity, s.RotateBefore = 30*24*time.Hour, 10*24*time.Hour
	s.Now = func() time.Time { return *now }
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
	ca, err := testSecret(client, &now).Ensure(context.Background())
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
	stored, err := ParseSecret(sec)
	if err != nil {
		t.Fatalf("the created Secret does not parse: %v", err)
	}
	if !stored.Cert.Equal(ca.Cert) || string(stored.Bundle) != string(ca.Bundle) {
		t.Error("ensure returned another CA than the one it stored")
	}
	if certs := bundleCerts(t, ca.Bundle); len(certs) != 1 || !certs[0].Equal(ca.Cert) {
		t.Errorf("a new Secret's bundle holds %d certificates, want just its CA", len(certs))
	}
	// Certificates keep whole seconds.
	if d := ca.Cert.NotAfter.Sub(now) - 30*24*time.Hour; !ca.Cert.IsCA || d < -time.Second || d > time.Second {
		t.Errorf("CA: isCA %v, valid until %s (want now + 30 days)", ca.Cert.IsCA, ca.Cert.NotAfter)
	}
}

func TestCASecretIsReusedWhenPresent(t *testing.T) {
	client := fake.NewClientset()
	now := time.Now()
	first, err := testSecret(client, &now).Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	now = now.Add(15 * 24 * time.Hour) // 15 of 30 days left: not yet due
	second, err := testSecret(client, &now).Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cert.Equal(first.Cert) || string(second.Bundle) != string(first.Bundle) {
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
		var winner *Shared
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if winner != nil {
				return false, nil, nil
			}
			// Another replica creates it between this one's get and create.
			ca, obj, err := testSecret(client, &now).generate(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			winner = ca
			if err := client.Tracker().Add(obj); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewAlreadyExists(secretsResource, testSecretName)
		})
		got, err := testSecret(client, &now).Ensure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if winner == nil || !got.Cert.Equal(winner.Cert) {
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
		got := make([]*Shared, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := testSecret(client, &now)
				s.client = firstGetBarrier{SecretsGetter: client.CoreV1(), barrier: &allRead, once: &sync.Once{}}
				got[i], errs[i] = s.Ensure(context.Background())
			}()
		}
		wg.Wait()
		stored, err := ParseSecret(storedSecret(t, client))
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
			if !got[i].Cert.Equal(stored.Cert) {
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
	s := testSecret(client, &now)
	first, err := s.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	now = t0.Add(19 * 24 * time.Hour) // 11 days left: not due
	if ca, err := s.Ensure(context.Background()); err != nil || !ca.Cert.Equal(first.Cert) {
		t.Fatalf("rotated with 11 of 30 days left (err %v)", err)
	}

	now = t0.Add(21 * 24 * time.Hour) // 9 days left: due
	second, err := s.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if second.Cert.Equal(first.Cert) {
		t.Fatal("not rotated with 9 of 30 days left")
	}
	certs := bundleCerts(t, second.Bundle)
	if len(certs) != 2 || !certs[0].Equal(second.Cert) || !certs[1].Equal(first.Cert) {
		t.Fatalf("bundle after rotation holds %d certificates, want the new CA then the previous one", len(certs))
	}
	if stored, err := ParseSecret(storedSecret(t, client)); err != nil || !stored.Cert.Equal(second.Cert) {
		t.Fatalf("the Secret does not hold the rotated CA (err %v)", err)
	}
	// Another replica at the same moment reuses the new CA.
	client.ClearActions()
	if ca, err := testSecret(client, &now).Ensure(context.Background()); err != nil || !ca.Cert.Equal(second.Cert) {
		t.Fatalf("a second replica did not reuse the rotated CA (err %v)", err)
	}
	if got := verbs(client); strings.Join(got, ",") != "get" {
		t.Errorf("second replica made %v after the rotation, want a single get", got)
	}

	// The next rotation drops the first CA, expired by then.
	now = t0.Add(42 * 24 * time.Hour)
	third, err := s.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	certs = bundleCerts(t, third.Bundle)
	if len(certs) != 2 || !certs[0].Equal(third.Cert) || !certs[1].Equal(second.Cert) {
		t.Errorf("bundle after the second rotation holds %d certificates, want the newest two (the expired first CA dropped)", len(certs))
	}
}

func TestCARotationConflictReReadsInsteadOfRotatingTwice(t *testing.T) {
	client := fake.NewClientset()
	t0 := time.Now()
	now := t0
	if _, err := testSecret(client, &now).Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(25 * 24 * time.Hour)
	var other *Shared
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
		prev, err := ParseSecret(stored)
		if err != nil {
			t.Fatal(err)
		}
		ca, obj, err := testSecret(client, &now).generate(stored, prev)
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
	got, err := testSecret(client, &now).Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if other == nil || !got.Cert.Equal(other.Cert) {
		t.Fatal("after a conflict the replica does not use the CA the other replica rotated to")
	}
	if got := verbs(client); strings.Join(got, ",") != "get,update,get" {
		t.Errorf("actions %v, want get, update (conflict), get", got)
	}
}

func TestMalformedCASecretIsAClearErrorAndLeftAlone(t *testing.T) {
	valid := func(t *testing.T) *corev1.Secret {
		now := time.Now()
		_, obj, err := testSecret(fake.NewClientset(), &now).generate(nil, nil)
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
			delete(s.Data, SecretKeyKey)
			delete(s.Data, SecretBundleKey)
		}, "no [tls.key ca.crt] in the data"},
		{"certificate not PEM", func(_ *testing.T, s *corev1.Secret) { s.Data[SecretCertKey] = []byte("garbage") },
			"tls.crt and tls.key are not a matching certificate and key"},
		{"key of another CA", func(t *testing.T, s *corev1.Secret) { s.Data[SecretKeyKey] = other(t).Data[SecretKeyKey] },
			"tls.crt and tls.key are not a matching certificate and key"},
		{"bundle not PEM", func(_ *testing.T, s *corev1.Secret) { s.Data[SecretBundleKey] = []byte("garbage") },
			"ca.crt: "},
		{"bundle without the CA", func(t *testing.T, s *corev1.Secret) { s.Data[SecretBundleKey] = other(t).Data[SecretBundleKey] },
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
			s.Data[SecretCertKey], s.Data[SecretKeyKey] = crt, key
		}, "is not a CA certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sec := valid(t)
			c.breakS(t, sec)
			client := fake.NewClientset(sec)
			now := time.Now()
			_, err := testSecret(client, &now).Ensure(context.Background())
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
