package webhook

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	certutil "k8s.io/client-go/util/cert"
)

// Validity of the certificates of --self-signed. The serving certificate is
// re-issued from the same CA once two thirds of its validity have passed, so
// the caBundle does not change when it is renewed. A CA kept in a Secret
// (--ca-secret-name) is replaced once less than a third of its validity is
// left; an in-memory CA lives as long as its process.
const (
	selfSignedCAValidity   = 10 * 365 * 24 * time.Hour
	selfSignedLeafValidity = 365 * 24 * time.Hour
)

// signingCA is a CA certificate with its key.
type signingCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newSigningCA generates a self-signed CA (ECDSA P-256) valid from an hour
// before now (clock skew) for validity.
func newSigningCA(now time.Time, validity time.Duration) (*signingCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: selfSignedCAName, Organization: []string{"kube-reclaim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &signingCA{cert: cert, key: key}, nil
}

// selfSignedCAName is the common name of every CA --self-signed generates.
const selfSignedCAName = "kube-reclaim-webhook-ca"

// SelfSigned is a CA and a serving certificate issued from it (ECDSA P-256).
// The CA is either generated in memory (NewSelfSigned: one process, so one
// replica) or shared by every replica through a Secret (the caBundleKeeper
// hands it over with useCA).
type SelfSigned struct {
	hosts []string

	mu     sync.RWMutex
	ca     *signingCA
	bundle []byte // PEM for the caBundle: ca, and during a rotation the CAs it replaced
	leaf   *tls.Certificate
}

// NewSelfSigned generates a CA and a serving certificate for hosts (DNS names
// or IP addresses; at least one).
func NewSelfSigned(hosts []string) (*SelfSigned, error) {
	s, err := newPendingSelfSigned(hosts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := newSigningCA(now, selfSignedCAValidity)
	if err != nil {
		return nil, err
	}
	bundle, err := certutil.EncodeCertificates(ca.cert)
	if err != nil {
		return nil, err
	}
	if err := s.useCA(ca, bundle, now); err != nil {
		return nil, err
	}
	return s, nil
}

// newPendingSelfSigned has no CA and no serving certificate yet: TLS
// handshakes fail and Check reports it until useCA.
func newPendingSelfSigned(hosts []string) (*SelfSigned, error) {
	if len(hosts) == 0 {
		return nil, errors.New("self-signed certificate needs at least one DNS name or IP address")
	}
	return &SelfSigned{hosts: append([]string(nil), hosts...)}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// useCA switches to ca (whose caBundle is bundle) and issues a serving
// certificate from it.
func (s *SelfSigned) useCA(ca *signingCA, bundle []byte, now time.Time) error {
	leaf, err := s.newLeaf(ca, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ca, s.bundle, s.leaf = ca, append([]byte(nil), bundle...), leaf
	return nil
}

// usesCA reports whether the serving certificate comes from ca and the
// caBundle is bundle.
func (s *SelfSigned) usesCA(ca *signingCA, bundle []byte) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ca != nil && s.ca.cert.Equal(ca.cert) && bytes.Equal(s.bundle, bundle)
}

// issue creates a new serving certificate signed by the current CA.
func (s *SelfSigned) issue(now time.Time) error {
	s.mu.RLock()
	ca := s.ca
	s.mu.RUnlock()
	if ca == nil {
		return errors.New("no CA yet")
	}
	leaf, err := s.newLeaf(ca, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ca == ca { // not replaced meanwhile
		s.leaf = leaf
	}
	return nil
}

// newLeaf issues a serving certificate for the hosts from ca. It never
// outlives ca: a certificate the apiserver can no longer verify is useless.
func (s *SelfSigned) newLeaf(ca *signingCA, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.hosts[0], Organization: []string{"kube-reclaim"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(selfSignedLeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	for _, h := range s.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// CABundle returns the PEM for a webhook clientConfig.caBundle: the CA, and
// while a shared CA is being rotated also the CAs it replaces, so that a
// replica still serving a certificate from the previous CA stays trusted.
func (s *SelfSigned) CABundle() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]byte(nil), s.bundle...)
}

// Leaf returns the current serving certificate (nil before the first CA).
func (s *SelfSigned) Leaf() *x509.Certificate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.leaf == nil {
		return nil
	}
	return s.leaf.Leaf
}

// GetCertificate is the tls.Config hook.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.leaf == nil {
		return nil, errors.New("no serving certificate yet: waiting for the CA")
	}
	return s.leaf, nil
}

// Check is a readiness check: it fails before the first serving certificate
// and once it expired.
func (s *SelfSigned) Check() error {
	leaf := s.Leaf()
	if leaf == nil {
		return errors.New("no self-signed serving certificate yet")
	}
	if na := leaf.NotAfter; time.Now().After(na) {
		return fmt.Errorf("self-signed serving certificate expired at %s", na)
	}
	return nil
}

// RenewIfDue re-issues the serving certificate from the same CA once two
// thirds of its validity have passed; it reports whether it did.
func (s *SelfSigned) RenewIfDue(now time.Time) (bool, error) {
	leaf := s.Leaf()
	if leaf == nil {
		return false, nil
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if now.Before(leaf.NotBefore.Add(life * 2 / 3)) {
		return false, nil
	}
	return true, s.issue(now)
}

// ServiceHosts returns the DNS names under which the apiserver reaches the
// Service namespace/name.
func ServiceHosts(namespace, name string) []string {
	if name == "" || namespace == "" {
		return nil
	}
	return []string{
		name + "." + namespace + ".svc",
		name,
		name + "." + namespace,
		name + "." + namespace + ".svc.cluster.local",
	}
}

// EnsureCABundle sets caBundle on every webhook of the MutatingWebhookConfiguration
// name that does not carry it already, with one Update (optimistic
// concurrency: a conflict is an error, retried by the caller). It reports
// whether it changed anything.
func EnsureCABundle(ctx context.Context, client admissionregistrationclient.MutatingWebhookConfigurationsGetter, name string, caBundle []byte) (bool, error) {
	return ensureCABundle(ctx, client, name, caBundle, false)
}

// errStaleCA: the configuration already trusts a newer CA of ours than the
// bundle a replica wanted to write.
var errStaleCA = errors.New("the caBundle holds a newer kube-reclaim CA than this replica knows; re-reading the CA Secret")

// ensureCABundle is EnsureCABundle; with monotonic it refuses to replace a
// bundle that holds a CA of ours newer than any in caBundle. Replicas sharing
// a CA Secret may read it on either side of a rotation: the one that read it
// before must not take the new CA out of the bundle while the one that
// rotated already serves a certificate signed by it.
func ensureCABundle(ctx context.Context, client admissionregistrationclient.MutatingWebhookConfigurationsGetter, name string, caBundle []byte, monotonic bool) (bool, error) {
	cfg, err := client.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if len(cfg.Webhooks) == 0 {
		return false, fmt.Errorf("MutatingWebhookConfiguration %s has no webhooks", name)
	}
	changed := false
	for i := range cfg.Webhooks {
		current := cfg.Webhooks[i].ClientConfig.CABundle
		if bytes.Equal(current, caBundle) {
			continue
		}
		if monotonic && newestCA(current).After(newestCA(caBundle)) {
			return false, errStaleCA
		}
		cfg.Webhooks[i].ClientConfig.CABundle = caBundle
		changed = true
	}
	if !changed {
		return false, nil
	}
	_, err = client.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{FieldManager: "kube-reclaim-webhook"})
	return err == nil, err
}

// newestCA is the latest NotBefore among the CAs of bundle that
// --self-signed generated (zero when none, or when bundle is not PEM: anyone
// else's CA never blocks a patch).
func newestCA(bundle []byte) time.Time {
	var newest time.Time
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return newest
	}
	for _, c := range certs {
		if c.IsCA && c.Subject.CommonName == selfSignedCAName && c.NotBefore.After(newest) {
			newest = c.NotBefore
		}
	}
	return newest
}

// caBundleKeeper keeps the caBundle patched: retrying quickly (backoff up to
// resync) until the configuration exists and is patched, then checking every
// resync in case someone reset it. It also renews the serving certificate
// and, with a CA Secret, reads the Secret every resync (creating or rotating
// it when due) and moves to the CA it holds.
type caBundleKeeper struct {
	client  admissionregistrationclient.MutatingWebhookConfigurationsGetter
	name    string
	certs   *SelfSigned
	secret  *caSecret // nil: the CA is the in-memory one of certs
	resync  time.Duration
	retry   time.Duration // first retry delay; 0 means one second
	patched atomic.Bool
}

func (k *caBundleKeeper) check() error {
	if !k.patched.Load() {
		return fmt.Errorf("caBundle of MutatingWebhookConfiguration %s not patched yet", k.name)
	}
	return nil
}

// sync does one round: CA Secret, serving certificate, caBundle.
func (k *caBundleKeeper) sync(ctx context.Context, log logrus.FieldLogger) error {
	if k.secret != nil {
		ca, err := k.secret.ensure(ctx)
		if err != nil {
			// Keep serving what this replica has: its certificate is
			// still trusted by the bundle it patched.
			return fmt.Errorf("CA Secret: %w", err)
		}
		if !k.certs.usesCA(ca.signingCA, ca.bundle) {
			// The apiserver must trust the new CA before this replica
			// serves a certificate signed by it, or its calls here fail.
			if _, err := ensureCABundle(ctx, k.client, k.name, ca.bundle, true); err != nil {
				return err
			}
			if err := k.certs.useCA(ca.signingCA, ca.bundle, time.Now()); err != nil {
				return err
			}
			log.WithFields(logrus.Fields{"caSerial": ca.cert.SerialNumber.String(), "caNotAfter": ca.cert.NotAfter,
				"serial": k.certs.Leaf().SerialNumber.String()}).Info("serving a certificate from the CA of the Secret")
		}
	}
	if renewed, err := k.certs.RenewIfDue(time.Now()); err != nil {
		log.WithError(err).Error("renewing the self-signed serving certificate")
	} else if renewed {
		log.WithField("serial", k.certs.Leaf().SerialNumber.String()).Info("self-signed serving certificate renewed")
	}
	changed, err := ensureCABundle(ctx, k.client, k.name, k.certs.CABundle(), k.secret != nil)
	if err != nil {
		return err
	}
	if changed {
		log.Info("webhook caBundle patched")
	}
	return nil
}

func (k *caBundleKeeper) run(ctx context.Context) {
	log := logrus.WithField("webhookConfiguration", k.name)
	first := k.retry
	if first <= 0 {
		first = time.Second
	}
	backoff := first
	for {
		wait := k.resync
		if err := k.sync(ctx, log); err != nil {
			log.WithError(err).Warn("cannot keep the webhook certificate and caBundle up to date yet; retrying")
			wait = min(backoff, k.resync)
			backoff *= 2
		} else {
			k.patched.Store(true)
			backoff = first
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
