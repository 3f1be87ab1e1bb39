package cluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
)

// certValidity is how long the cluster's CAs and certificates are valid:
// clusters are short-lived.
const certValidity = 24 * time.Hour

// CA is a certificate authority generated for one cluster.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	ca      *certauthority.CA
}

// NewCA generates a self-signed CA valid for a day.
func NewCA(name string) (*CA, error) {
	ca, err := certauthority.NewCA(pkix.Name{CommonName: name}, time.Now(), certValidity)
	if err != nil {
		return nil, err
	}
	certPEM, err := ca.CertPEM()
	if err != nil {
		return nil, err
	}
	return &CA{Cert: ca.Cert, CertPEM: certPEM, ca: ca}, nil
}

// KeyPair is a PEM-encoded certificate and key.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// CertSpec describes a leaf certificate; a zero Validity is a day.
type CertSpec = certauthority.Spec

// Issue signs a leaf certificate (never beyond the CA's day).
func (ca *CA) Issue(spec CertSpec) (*KeyPair, error) {
	if spec.Validity == 0 {
		spec.Validity = certValidity
	}
	cert, err := ca.ca.Issue(spec, time.Now())
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := certauthority.EncodeKeyPair(cert)
	if err != nil {
		return nil, err
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, Cert: cert.Leaf}, nil
}

// Write stores the pair as dir/name.crt and dir/name.key and returns the paths.
func (kp *KeyPair) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err = os.WriteFile(certFile, kp.CertPEM, 0o600); err != nil {
		return
	}
	err = os.WriteFile(keyFile, kp.KeyPEM, 0o600)
	return
}

// ServingCert issues a loopback serving certificate with extra DNS names.
func (ca *CA) ServingCert(name string, dnsNames ...string) (*KeyPair, error) {
	return ca.Issue(CertSpec{CommonName: name, Server: true,
		Hosts: append([]string{"localhost", "127.0.0.1", "::1"}, dnsNames...)})
}

// writeSigningKey writes a PEM ECDSA key and its public half (for service
// account tokens).
func writeSigningKey(dir string) (keyFile, pubFile string, err error) {
	key, err := certauthority.GenerateKey()
	if err != nil {
		return "", "", err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err = os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	err = os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
	return keyFile, pubFile, err
}
