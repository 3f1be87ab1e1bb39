package certauthority

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// clockSkew is how far before now every certificate starts to be valid, so
// a peer whose clock runs a little behind accepts it.
const clockSkew = time.Hour

// CA is a CA certificate with its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// GenerateKey generates the key of every certificate issued here: ECDSA
// P-256, which every peer of a Kubernetes cluster accepts and which is cheap
// to generate and to handshake with.
func GenerateKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// NewCA generates a self-signed CA for subject, valid from clockSkew before
// now for validity. It signs leaves only (no intermediate CAs).
func NewCA(subject pkix.Name, now time.Time, validity time.Duration) (*CA, error) {
	key, err := GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-clockSkew),
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
	return &CA{Cert: cert, Key: key}, nil
}

// CertPEM is the CA certificate in PEM, as a caBundle or a kubeconfig's
// certificate-authority-data wants it.
func (ca *CA) CertPEM() ([]byte, error) {
	return certutil.EncodeCertificates(ca.Cert)
}

// Spec describes a leaf certificate.
type Spec struct {
	CommonName   string
	Organization []string
	// Hosts are the DNS names and IP addresses the certificate is valid for.
	Hosts []string
	// Server and Client are the extended key usages.
	Server, Client bool
	// Validity is how long after its issue the certificate is valid; it
	// never outlives its CA.
	Validity time.Duration
}

// Issue signs a leaf certificate for spec with a new key. It never outlives
// ca: a certificate its peers can no longer verify is useless.
func (ca *CA) Issue(spec Spec, now time.Time) (*tls.Certificate, error) {
	key, err := GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("generating the key of %q: %w", spec.CommonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(spec.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range spec.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate %q: %w", spec.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// EncodeKeyPair returns the PEM of a certificate Issue returned and of its
// key (SEC 1 for ECDSA, as keyutil writes it).
func EncodeKeyPair(c *tls.Certificate) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = certutil.EncodeCertificates(c.Leaf); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(c.PrivateKey); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// RenewalDue reports whether a leaf is due for renewal at now: once two
// thirds of its validity have passed, leaving a third to get the new one in
// place.
func RenewalDue(leaf *x509.Certificate, now time.Time) bool {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return !now.Before(leaf.NotBefore.Add(life * 2 / 3))
}

// CheckExpiry fails once the serving certificate leaf has expired at now: a
// server that presents it is refused by every client, so it is not ready.
func CheckExpiry(leaf *x509.Certificate, now time.Time) error {
	if na := leaf.NotAfter; now.After(na) {
		return fmt.Errorf("serving certificate expired at %s", na)
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}
