package certauthority

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
	// SecretCertKey holds the current CA certificate.
	SecretCertKey = corev1.TLSCertKey
	// SecretKeyKey holds its private key.
	SecretKeyKey = corev1.TLSPrivateKeyKey
	// SecretBundleKey holds the caBundle: the current CA first, then the
	// CAs it replaced that have not expired yet.
	SecretBundleKey = "ca.crt"
)

// secretAttempts bounds the re-reads after losing a create or update race;
// every lost race means another replica wrote a usable CA, so two suffice in
// practice.
const secretAttempts = 5

// fieldManager writes the Secret: the webhook is the one role that keeps it.
const fieldManager = "kube-reclaim-webhook"

// Secret keeps the CA shared by every webhook replica in one Secret, in
// the manner of cert-manager's dynamic authority: the first replica creates
// it, every replica reuses it, and whichever replica first sees it within
// RotateBefore of its expiry replaces it. Creates and updates are optimistic
// (AlreadyExists and Conflict mean another replica won: read again), so all
// replicas end up with the same CA without any lock.
type Secret struct {
	client    corev1client.SecretsGetter
	namespace string
	name      string
	// Validity of a new CA, and how long before its expiry it is replaced.
	// The CA it replaces stays in the bundle until it expires, so every
	// replica has RotateBefore to pick up the new one. NewSecret sets
	// CAValidity and a third of it; tests shorten them.
	Validity     time.Duration
	RotateBefore time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewSecret keeps the shared CA in Secret namespace/name.
func NewSecret(client corev1client.SecretsGetter, namespace, name string) *Secret {
	return &Secret{client: client, namespace: namespace, name: name,
		Validity: CAValidity, RotateBefore: CAValidity / 3}
}

func (s *Secret) clock() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Secret) String() string { return "Secret " + s.namespace + "/" + s.name }

// Ensure returns the shared CA: read from the Secret, created when the
// Secret does not exist, replaced when it is due. A Secret whose content is
// not a usable CA is an error and is left alone (see ParseSecret).
func (s *Secret) Ensure(ctx context.Context) (*Shared, error) {
	log := logrus.WithField("secret", s.namespace+"/"+s.name)
	for range secretAttempts {
		ca, retry, err := s.ensureOnce(ctx, log)
		if !retry {
			return ca, err
		}
	}
	return nil, fmt.Errorf("%s kept changing during %d attempts to read it", s, secretAttempts)
}

// ensureOnce is one attempt of Ensure; retry means another replica wrote the
// Secret meanwhile and it must be read again.
func (s *Secret) ensureOnce(ctx context.Context, log logrus.FieldLogger) (ca *Shared, retry bool, err error) {
	secrets := s.client.Secrets(s.namespace)
	sec, err := secrets.Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s.create(ctx, log)
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", s, err)
	}
	ca, err = ParseSecret(sec)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w; it is left as it is (delete it to have a new CA generated)", s, err)
	}
	if ca.Cert.NotAfter.Sub(s.clock()) > s.RotateBefore {
		return ca, false, nil
	}
	next, obj, err := s.generate(sec, ca)
	if err != nil {
		return nil, false, err
	}
	// sec carries the resourceVersion just read: if another replica
	// rotated meanwhile, this update fails with a conflict.
	_, err = secrets.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		log.Debug("the CA Secret changed while rotating it; reading it again")
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("rotating the CA in %s: %w", s, err)
	}
	log.WithFields(logrus.Fields{"previousNotAfter": ca.Cert.NotAfter, "caNotAfter": next.Cert.NotAfter}).Info("rotated the CA in the Secret")
	return next, false, nil
}

// create makes the Secret with a new CA.
func (s *Secret) create(ctx context.Context, log logrus.FieldLogger) (ca *Shared, retry bool, err error) {
	ca, obj, err := s.generate(nil, nil)
	if err != nil {
		return nil, false, err
	}
	_, err = s.client.Secrets(s.namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		log.Debug("another replica created the CA Secret first; reading it")
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating %s: %w", s, err)
	}
	log.WithField("caNotAfter", ca.Cert.NotAfter).Info("created the CA Secret")
	return ca, false, nil
}

// generate makes a new CA and the Secret that holds it: a new object, or
// (rotation) a copy of old whose bundle keeps the unexpired CAs of prev.
func (s *Secret) generate(old *corev1.Secret, prev *Shared) (*Shared, *corev1.Secret, error) {
	now := s.clock()
	ca, err := newSelfSignedCA(now, s.Validity)
	if err != nil {
		return nil, nil, err
	}
	bundleCerts := []*x509.Certificate{ca.Cert}
	if prev != nil {
		previous, err := certutil.ParseCertsPEM(prev.Bundle)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range previous {
			if c.NotAfter.After(now) {
				bundleCerts = append(bundleCerts, c)
			}
		}
	}
	certPEM, err := ca.CertPEM()
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(ca.Key)
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
	obj.Data = map[string][]byte{SecretCertKey: certPEM, SecretKeyKey: keyPEM, SecretBundleKey: bundle}
	return &Shared{CA: ca, Bundle: bundle}, obj, nil
}

// ParseSecret reads the CA of a Secret the webhook wrote. Content it
// cannot use is an error, and the Secret is not overwritten: the webhook only
// ever writes complete, matching data, so anything else was written by
// someone else (a person, another tool using the same name, a newer version
// of kube-reclaim with another format), and replacing it could destroy a key
// still in use. Replicas already running keep the CA they hold and stay
// trusted; a new replica stays unready (the webhook is failurePolicy Ignore,
// so node writes pass meanwhile) with this error in its log until the Secret
// is repaired or deleted.
func ParseSecret(sec *corev1.Secret) (*Shared, error) {
	var missing []string
	for _, k := range []string{SecretCertKey, SecretKeyKey, SecretBundleKey} {
		if len(sec.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no %v in the data", missing)
	}
	pair, err := tls.X509KeyPair(sec.Data[SecretCertKey], sec.Data[SecretKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s and %s are not a matching certificate and key: %w", SecretCertKey, SecretKeyKey, err)
	}
	cert := pair.Leaf
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s (%q) is not a CA certificate", SecretCertKey, cert.Subject.CommonName)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: %T cannot sign", SecretKeyKey, pair.PrivateKey)
	}
	bundle, err := certutil.ParseCertsPEM(sec.Data[SecretBundleKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretBundleKey, err)
	}
	if !containsCert(bundle, cert) {
		return nil, fmt.Errorf("%s does not contain the CA of %s", SecretBundleKey, SecretCertKey)
	}
	return &Shared{CA: &CA{Cert: cert, Key: key}, Bundle: sec.Data[SecretBundleKey]}, nil
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}
