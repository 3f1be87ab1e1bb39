package serving

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
)

// CertReloader serves a certificate and key read from files and re-reads them
// when their content changes, so a rotated certificate (cert-manager, a
// Secret update) is served without a restart. A bad new pair is logged and
// ignored: the last good certificate stays in use.
type CertReloader struct {
	certFile, keyFile string

	mu       sync.RWMutex
	cert     *tls.Certificate
	certPEM  []byte
	keyPEM   []byte
	loadErr  error
	onReload func(*x509.Certificate)
}

// NewCertReloader loads the pair once; the error says why it could not.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// OnReload registers a callback run after each successful reload.
func (r *CertReloader) OnReload(f func(*x509.Certificate)) { r.onReload = f }

func (r *CertReloader) reload() (bool, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return false, r.setErr(fmt.Errorf("reading certificate: %w", err))
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return false, r.setErr(fmt.Errorf("reading private key: %w", err))
	}
	r.mu.RLock()
	same := bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM)
	r.mu.RUnlock()
	if same {
		return false, r.setErr(nil)
	}
	// X509KeyPair fills pair.Leaf (Go 1.23 on), which Check and Run read.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// A writer may have replaced one file but not yet the other.
		return false, r.setErr(fmt.Errorf("loading key pair: %w", err))
	}
	r.mu.Lock()
	r.cert, r.certPEM, r.keyPEM, r.loadErr = &pair, certPEM, keyPEM, nil
	r.mu.Unlock()
	if r.onReload != nil {
		r.onReload(pair.Leaf)
	}
	return true, nil
}

func (r *CertReloader) setErr(err error) error {
	r.mu.Lock()
	r.loadErr = err
	r.mu.Unlock()
	return err
}

// Run polls the files every interval until ctx ends. Polling rather than
// inotify: Secret volumes swap a symlink, which inotify watchers often miss.
func (r *CertReloader) Run(ctx context.Context, interval time.Duration) {
	wait.NonSlidingUntilWithContext(ctx, func(context.Context) {
		changed, err := r.reload()
		switch {
		case err != nil:
			logrus.WithError(err).WithField("cert", r.certFile).Warn("serving certificate not reloaded; keeping the previous one")
		case changed:
			r.mu.RLock()
			leaf := r.cert.Leaf
			r.mu.RUnlock()
			logrus.WithFields(logrus.Fields{"cert": r.certFile, "serial": leaf.SerialNumber.String(), "notAfter": leaf.NotAfter}).Info("serving certificate reloaded")
		}
	}, interval)
}

// GetCertificate is the tls.Config hook.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.cert == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return r.cert, nil
}

// Check is a readiness check: it fails when the files cannot be loaded now or
// the certificate in use has expired.
func (r *CertReloader) Check() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.loadErr != nil {
		return r.loadErr
	}
	if r.cert == nil {
		return errors.New("no serving certificate loaded")
	}
	return certauthority.CheckExpiry(r.cert.Leaf, time.Now())
}

// TLSConfig returns a server configuration with TLS 1.2 as the minimum that
// serves whatever certificate get returns.
func TLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get}
}
