package webhook

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Keys of the CA Secret (type kubernetes.io/tls, so the apiserver insists on
// the first two).
const (
	// CASecretCertKey holds the current CA certificate.
	CASecretCertKey = corev1.TLSCertKey
	// CASecretKeyKey holds its private key.
	CASecretKeyKey = corev1.TLSPrivateKeyKey
	// CASecretBundleKey holds the caBundle: the current CA first, then the
	// CAs it replaced that have not expired yet.
	CASecretBundleKey = "ca.crt"
)

// caSecretAttempts bounds the re-reads after losing a create or update race;
// every lost race means another replica wrote a usable CA, so two suffice in
// practice.
const caSecretAttempts = 5

// caSecret keeps the CA shared by every webhook replica in one Secret, in
// the manner of cert-manager's dynamic authority: the first replica creates
// it, every replica reuses it, and whichever replica first sees it within
// rotateBefore of its expiry replaces it. Creates and updates are optimistic
// (AlreadyExists and Conflict mean another replica won: read again), so all
// replicas end up with the same CA without any lock.
type caSecret struct {
	client    corev1client.SecretsGetter
	namespace string
	name      string
	// validity of a new CA, and how long before its expiry it is replaced.
	// The CA it replaces stays in the bundle until it expires, so every
	// replica has rotateBefore to pick up the new one.
	validity     time.Duration
	rotateBefore time.Duration
	now          func() time.Time // nil: time.Now
}

func newCASecret(client corev1client.SecretsGetter, namespace, name string) *caSecret {
	return &caSecret{client: client, namespace: namespace, name: name,
		validity: selfSignedCAValidity, rotateBefore: selfSignedCAValidity / 3}
}

// sharedCA is the content of the Secret.
type sharedCA struct {
	*signingCA
	bundle []byte
}

func (s *caSecret) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *caSecret) String() string { return "Secret " + s.namespace + "/" + s.name }

// ensure returns the shared CA: read from the Secret, created when the
// Secret does not exist, replaced when it is due. A Secret whose content is
// not a usable CA is an error and is left alone (see parseCASecret).
func (s *caSecret) ensure(ctx context.Context) (*sharedCA, error) {
	log := logrus.WithField("secret", s.namespace+"/"+s.name)
	secrets := s.client.Secrets(s.namespace)
	for range caSecretAttempts {
		sec, err := secrets.Get(ctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			ca, obj, err := s.generate(nil, nil)
			if err != nil {
				return nil, err
			}
			_, err = secrets.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kube-reclaim-webhook"})
			if apierrors.IsAlreadyExists(err) {
				log.Debug("another replica created the CA Secret first; reading it")
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating %s: %w", s, err)
			}
			log.WithField("caNotAfter", ca.cert.NotAfter).Info("created the CA Secret")
			return ca, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s, err)
		}
		ca, err := parseCASecret(sec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; it is left as it is (delete it to have a new CA generated)", s, err)
		}
		if ca.cert.NotAfter.Sub(s.clock()) > s.rotateBefore {
			return ca, nil
		}
		next, obj, err := s.generate(sec, ca)
		if err != nil {
			return nil, err
		}
		// sec carries the resourceVersion just read: if another replica
		// rotated meanwhile, this update fails with a conflict.
		_, err = secrets.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "kube-reclaim-webhook"})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.Debug("the CA Secret changed while rotating it; reading it again")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("rotating the CA in %s: %w", s, err)
		}
		log.WithFields(logrus.Fields{"previousNotAfter": ca.cert.NotAfter, "caNotAfter": next.cert.NotAfter}).Info("rotated the CA in the Secret")
		return next, nil
	}
	return nil, fmt.Errorf("%s kept changing during %d attempts to read it", s, caSecretAttempts)
}

// generate makes a new CA and the Secret that holds it: a new object, or
// (rotation) a copy of old whose bundle keeps the unexpired CAs of prev.
func (s *caSecret) generate(old *corev1.Secret, prev *sharedCA) (*sharedCA, *corev1.Secret, error) {
	now := s.clock()
	ca, err := newSigningCA(now, s.validity)
	if err != nil {
		return nil, nil, err
	}
	bundleCerts := []*x509.Certificate{ca.cert}
	if prev != nil {
		previous, err := certutil.ParseCertsPEM(prev.bundle)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range previous {
			if c.NotAfter.After(now) {
				bundleCerts = append(bundleCerts, c)
			}
		}
	}
	certPEM, err := certutil.EncodeCertificates(ca.cert)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(ca.key)
	if err != nil {
		return nil, nil, err
	}
	bundle, err := certutil.EncodeCertificates(bundleCerts...)
	if err != nil {
		return nil, nil, err
	}
	obj := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.name,
			Namespace: s.namespace,
			Labels:    map[string]string{"app.kubernetes.io/name": "kube-reclaim", "app.kubernetes.io/component": "webhook"},
		},
		Type: corev1.SecretTypeTLS,
	}
	if old != nil {
		obj = old.DeepCopy()
	}
	obj.Data = map[string][]byte{CASecretCertKey: certPEM, CASecretKeyKey: keyPEM, CASecretBundleKey: bundle}
	return &sharedCA{signingCA: ca, bundle: bundle}, obj, nil
}

// parseCASecret reads the CA of a Secret the webhook wrote. Content it
// cannot use is an error, and the Secret is not overwritten: the webhook only
// ever writes complete, matching data, so anything else was written by
// someone else (a person, another tool using the same name, a newer version
// of kube-reclaim with another format), and replacing it could destroy a key
// still in use. Replicas already running keep the CA they hold and stay
// trusted; a new replica stays unready (the webhook is failurePolicy Ignore,
// so node writes pass meanwhile) with this error in its log until the Secret
// is repaired or deleted.
func parseCASecret(sec *corev1.Secret) (*sharedCA, error) {
	var missing []string
	for _, k := range []string{CASecretCertKey, CASecretKeyKey, CASecretBundleKey} {
		if len(sec.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no %v in the data", missing)
	}
	pair, err := tls.X509KeyPair(sec.Data[CASecretCertKey], sec.Data[CASecretKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a matching certificate and key: %w", CASecretCertKey, CASecretKeyKey, err)
	}
	cert := pair.Leaf
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s (%q) is not a CA certificate", CASecretCertKey, cert.Subject.CommonName)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: %T cannot sign", CASecretKeyKey, pair.PrivateKey)
	}
	bundle, err := certutil.ParseCertsPEM(sec.Data[CASecretBundleKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CASecretBundleKey, err)
	}
	if !containsCert(bundle, cert) {
		return nil, fmt.Errorf("%s does not contain the CA of %s", CASecretBundleKey, CASecretCertKey)
	}
	return &sharedCA{signingCA: &signingCA{cert: cert, key: key}, bundle: sec.Data[CASecretBundleKey]}, nil
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}
