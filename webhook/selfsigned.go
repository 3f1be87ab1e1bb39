package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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
)

// Validity of the in-memory certificates of --self-signed. They live as long
// as the process; the serving certificate is re-issued from the same CA once
// two thirds of its validity have passed, so the caBundle never changes while
// the process runs.
const (
	selfSignedCAValidity   = 10 * 365 * 24 * time.Hour
	selfSignedLeafValidity = 365 * 24 * time.Hour
)

// SelfSigned is a CA and a serving certificate generated in memory (ECDSA
// P-256). Each process generates its own CA, so --self-signed suits a single
// replica; several replicas would keep replacing each other's caBundle (use
// certificate files, for example from cert-manager, for more).
type SelfSigned struct {
	hosts  []string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte

	mu   sync.RWMutex
	leaf *tls.Certificate
}

// NewSelfSigned generates a CA and a serving certificate for hosts (DNS names
// or IP addresses; at least one).
func NewSelfSigned(hosts []string) (*SelfSigned, error) {
	if len(hosts) == 0 {
		return nil, errors.New("self-signed certificate needs at least one DNS name or IP address")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kube-reclaim-webhook-ca", Organization: []string{"kube-reclaim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	s := &SelfSigned{
		hosts:  append([]string(nil), hosts...),
		caCert: caCert,
		caKey:  caKey,
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
	if err := s.issue(now); err != nil {
		return nil, err
	}
	return s, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// issue creates a new serving certificate signed by the CA.
func (s *SelfSigned) issue(now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.hosts[0], Organization: []string{"kube-reclaim"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(selfSignedLeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range s.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, &key.PublicKey, s.caKey)
	if err != nil {
		return fmt.Errorf("creating serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	s.mu.Lock()
	s.leaf = cert
	s.mu.Unlock()
	return nil
}

// CABundle returns the PEM of the CA, for a webhook clientConfig.caBundle.
func (s *SelfSigned) CABundle() []byte { return append([]byte(nil), s.caPEM...) }

// Leaf returns the current serving certificate.
func (s *SelfSigned) Leaf() *x509.Certificate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leaf.Leaf
}

// GetCertificate is the tls.Config hook.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leaf, nil
}

// Check is a readiness check: it fails once the serving certificate expired.
func (s *SelfSigned) Check() error {
	if na := s.Leaf().NotAfter; time.Now().After(na) {
		return fmt.Errorf("self-signed serving certificate expired at %s", na)
	}
	return nil
}

// RenewIfDue re-issues the serving certificate from the same CA once two
// thirds of its validity have passed; it reports whether it did.
func (s *SelfSigned) RenewIfDue(now time.Time) (bool, error) {
	leaf := s.Leaf()
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
	cfg, err := client.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if len(cfg.Webhooks) == 0 {
		return false, fmt.Errorf("MutatingWebhookConfiguration %s has no webhooks", name)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caBundle) {
			cfg.Webhooks[i].ClientConfig.CABundle = caBundle
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	_, err = client.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{FieldManager: "kube-reclaim-webhook"})
	return err == nil, err
}

// caBundleKeeper keeps the caBundle patched: retrying quickly (backoff up to
// resync) until the configuration exists and is patched, then checking every
// resync in case someone reset it. It also renews the serving certificate.
type caBundleKeeper struct {
	client  admissionregistrationclient.MutatingWebhookConfigurationsGetter
	name    string
	certs   *SelfSigned
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

func (k *caBundleKeeper) run(ctx context.Context) {
	log := logrus.WithField("webhookConfiguration", k.name)
	first := k.retry
	if first <= 0 {
		first = time.Second
	}
	backoff := first
	for {
		wait := k.resync
		if renewed, err := k.certs.RenewIfDue(time.Now()); err != nil {
			log.WithError(err).Error("renewing the self-signed serving certificate")
		} else if renewed {
			log.WithField("serial", k.certs.Leaf().SerialNumber.String()).Info("self-signed serving certificate renewed")
		}
		changed, err := EnsureCABundle(ctx, k.client, k.name, k.certs.CABundle())
		switch {
		case err != nil:
			log.WithError(err).Warn("cannot patch the webhook caBundle yet; retrying")
			wait = min(backoff, k.resync)
			backoff *= 2
		default:
			if changed {
				log.Info("webhook caBundle patched")
			}
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
