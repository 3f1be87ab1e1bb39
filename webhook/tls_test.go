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
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
)

// writeCertPair writes a self-signed certificate for 127.0.0.1 with the
// given serial, replacing the files atomically (as a Secret volume update does).
func writeCertPair(t *testing.T, dir string, serial int64) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "webhook-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []struct {
		path string
		pem  []byte
	}{
		{keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
		{certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
	} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.pem, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// serveTLS serves h over TLS on a loopback port until the test ends.
func serveTLS(t *testing.T, h http.Handler, get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serving.Serve(ctx, serving.NewServer(ln.Addr().String(), h), ln, serving.TLSConfig(get))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func servedSerial(addr string) (string, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test only reads the serial
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestReplacedCertificateFilesAreServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCertPair(t, dir, 1001)
	reloader, err := serving.NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reloader.Run(ctx, 20*time.Millisecond)
	addr := serveTLS(t, newTestHandler(t, testNames, nil), reloader.GetCertificate)

	if s, err := servedSerial(addr); err != nil || s != "1001" {
		t.Fatalf("served serial %q, %v; want 1001", s, err)
	}
	writeCertPair(t, dir, 2002)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := servedSerial(addr)
		if err == nil && s == "2002" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %q (%v) 5 s after the files changed", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := reloader.Check(); err != nil {
		t.Errorf("readiness after reload: %v", err)
	}
}

func TestTLS11ClientIsRefused(t *testing.T) {
	certFile, keyFile := writeCertPair(t, t.TempDir(), 7)
	reloader, err := serving.NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, newTestHandler(t, testNames, nil), reloader.GetCertificate)
	//nolint:gosec // deliberately old protocol versions
	if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 client was accepted")
	}
	//nolint:gosec
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("a TLS 1.2 client was refused: %v", err)
	}
	conn.Close()
}

func TestRunServesTheWebhookAndHealth(t *testing.T) {
	certFile, keyFile := writeCertPair(t, t.TempDir(), 42)
	o := NewOptions()
	o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
	o.PublisherLeaseName = "" // no cluster needed
	o.ListenAddress, o.HealthAddress, o.MetricsAddress = servingtest.FreeAddr(t), servingtest.FreeAddr(t), servingtest.FreeAddr(t)
	o.Kubeconfig = servingtest.NewReviewAPI(t).Kubeconfig // reviews the metrics scraper
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get("http://" + o.HealthAddress + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 10 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	obj := newNode("n1").json(t)
	res, err := client.Post("https://"+o.ListenAddress+Path, "application/json", bytes.NewReader(reviewSpec{object: obj}.json(t)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"allowed":true`)) {
		t.Fatalf("answer %d %s", res.StatusCode, body)
	}
	_, metrics := servingtest.Get(t, "https://"+o.MetricsAddress+"/metrics", servingtest.AllowedToken)
	for _, name := range []string{
		`kube_reclaim_webhook_review_duration_seconds_count{outcome="patched"} 1`,
		`kube_reclaim_webhook_stale_injections_total{reason="annotation-missing"} 1`,
		`kube_reclaim_webhook_http_request_duration_seconds_count{code="200",route="/mutate-node-status"} 1`,
	} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop after the context ended")
	}
}

func TestRunFailsWithoutCertificateFiles(t *testing.T) {
	o := NewOptions()
	dir := t.TempDir()
	o.TLSCertFile, o.TLSKeyFile = filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key")
	o.PublisherLeaseName = ""
	o.ListenAddress, o.HealthAddress = servingtest.FreeAddr(t), servingtest.FreeAddr(t)
	err := o.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serving certificate") {
		t.Fatalf("Run = %v, want an error about the serving certificate", err)
	}
}
