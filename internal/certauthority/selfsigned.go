package certauthority

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"sync"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// Validity of the certificates of the webhook's --self-signed. The serving
// certificate is re-issued from the same CA once two thirds of its validity
// have passed (RenewalDue), so the caBundle does not change when it is
// renewed. A CA kept in a Secret is replaced once less than a third of its
// validity is left (Secret); an in-memory CA lives as long as its process.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// CACommonName is the common name of every CA NewSelfSigned and Secret
// generate; NewestCA tells them from anyone else's by it.
const CACommonName = "kube-reclaim-webhook-ca"

func newSelfSignedCA(now time.Time, validity time.Duration) (*CA, error) {
	return NewCA(pkix.Name{CommonName: CACommonName, Organization: []string{"kube-reclaim"}}, now, validity)
}

// Shared is a CA with the caBundle that goes with it: the CA, and during a
// rotation the CAs it replaced.
type Shared struct {
	*CA
	Bundle []byte
}

// SelfSigned is a CA and a serving certificate issued from it. The CA is
// either generated in memory (NewSelfSigned: one process, so one replica)
// or shared by every replica through a Secret (handed over with Use).
type SelfSigned struct {
	spec Spec

	mu     sync.RWMutex
	ca     *CA
	bundle []byte // PEM for the caBundle: ca, and during a rotation the CAs it replaced
	leaf   *tls.Certificate
}

// NewSelfSigned generates a CA and a serving certificate for hosts (DNS names
// or IP addresses; at least one).
func NewSelfSigned(hosts []string) (*SelfSigned, error) {
	s, err := NewPendingSelfSigned(hosts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := newSelfSignedCA(now, CAValidity)
	if err != nil {
		return nil, err
	}
	bundle, err := ca.CertPEM()
	if err != nil {
		return nil, err
	}
	if err := s.Use(&Shared{CA: ca, Bundle: bundle}, now); err != nil {
		return nil, err
	}
	return s, nil
}

// NewPendingSelfSigned has no CA and no serving certificate yet: TLS
// handshakes fail and Check reports it until Use.
func NewPendingSelfSigned(hosts []string) (*SelfSigned, error) {
	if len(hosts) == 0 {
		return nil, errors.New("self-signed certificate needs at least one DNS name or IP address")
	}
	return &SelfSigned{spec: Spec{CommonName: hosts[0], Organization: []string{"kube-reclaim"},
		Hosts: append([]string(nil), hosts...), Server: true, Validity: LeafValidity}}, nil
}

// Use switches to ca and issues a serving certificate from it.
func (s *SelfSigned) Use(ca *Shared, now time.Time) error {
	leaf, err := ca.Issue(s.spec, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ca, s.bundle, s.leaf = ca.CA, append([]byte(nil), ca.Bundle...), leaf
	return nil
}

// Uses reports whether the serving certificate comes from ca and the
// caBundle is ca's.
func (s *SelfSigned) Uses(ca *Shared) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ca != nil && s.ca.Cert.Equal(ca.Cert) && bytes.Equal(s.bundle, ca.Bundle)
}

// issue creates a new serving certificate signed by the current CA.
func (s *SelfSigned) issue(now time.Time) error {
	s.mu.RLock()
	ca := s.ca
	s.mu.RUnlock()
	if ca == nil {
		return errors.New("no CA yet")
	}
	leaf, err := ca.Issue(s.spec, now)
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
	if err := CheckExpiry(leaf, time.Now()); err != nil {
		return fmt.Errorf("self-signed %w", err)
	}
	return nil
}

// RenewIfDue re-issues the serving certificate from the same CA once it is
// due (RenewalDue); it reports whether it did.
func (s *SelfSigned) RenewIfDue(now time.Time) (bool, error) {
	leaf := s.Leaf()
	if leaf == nil || !RenewalDue(leaf, now) {
		return false, nil
	}
	return true, s.issue(now)
}

// NewestCA is the latest NotBefore among the CAs of bundle that this
// package generated (zero when none, or when bundle is not PEM: anyone
// else's CA never counts).
func NewestCA(bundle []byte) time.Time {
	var newest time.Time
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return newest
	}
	for _, c := range certs {
		if c.IsCA && c.Subject.CommonName == CACommonName && c.NotBefore.After(newest) {
			newest = c.NotBefore
		}
	}
	return newest
}
