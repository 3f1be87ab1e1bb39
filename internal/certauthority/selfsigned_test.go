package certauthority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// handshake serves get over TLS on a loopback port and dials it trusting
// only bundle, as the apiserver calls a webhook with its caBundle.
func handshake(t *testing.T, get func(*tls.ClientHelloInfo) (*tls.Certificate, error), bundle []byte, serverName string) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.(*tls.Conn).Handshake()
	}()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("CABundle is not PEM")
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}

func TestSelfSignedCertificateIsTrustedThroughItsCABundle(t *testing.T) {
	certs, err := NewSelfSigned([]string{"127.0.0.1", "kube-reclaim-webhook.kube-reclaim.svc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "kube-reclaim-webhook.kube-reclaim.svc"} {
		if err := handshake(t, certs.GetCertificate, certs.CABundle(), name); err != nil {
			t.Errorf("TLS to %s verified by the CA bundle: %v", name, err)
		}
	}
	// Positive control: a name the certificate does not carry is refused.
	if err := handshake(t, certs.GetCertificate, certs.CABundle(), "other.kube-reclaim.svc"); err == nil {
		t.Error("a name outside the certificate was trusted")
	}
	leaf := certs.Leaf()
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("serving key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	if leaf.Subject.CommonName != "127.0.0.1" || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("leaf %q with usages %v, want the first host and server auth only", leaf.Subject.CommonName, leaf.ExtKeyUsage)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d != LeafValidity+time.Hour {
		t.Errorf("leaf valid for %s, want a year from an hour ago", d)
	}
	if err := certs.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestSelfSignedLeafIsRenewedFromTheSameCA(t *testing.T) {
	certs, err := NewSelfSigned([]string{"webhook.example"})
	if err != nil {
		t.Fatal(err)
	}
	before := certs.Leaf()
	if renewed, err := certs.RenewIfDue(time.Now().Add(30 * 24 * time.Hour)); renewed || err != nil {
		t.Fatalf("renewed a month in: %v %v", renewed, err)
	}
	renewed, err := certs.RenewIfDue(time.Now().Add(300 * 24 * time.Hour))
	if !renewed || err != nil {
		t.Fatalf("not renewed 300 days in: %v %v", renewed, err)
	}
	after := certs.Leaf()
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Error("renewed certificate has the same serial")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CABundle())
	if _, err := after.Verify(x509.VerifyOptions{DNSName: "webhook.example", Roots: pool, CurrentTime: time.Now().Add(300 * 24 * time.Hour)}); err != nil {
		t.Errorf("renewed certificate does not chain to the unchanged CA bundle: %v", err)
	}
}

func TestPendingSelfSignedServesNothingUntilItHasACA(t *testing.T) {
	if _, err := NewPendingSelfSigned(nil); err == nil {
		t.Error("a certificate without any name was accepted")
	}
	certs, err := NewPendingSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Check(); err == nil || !strings.Contains(err.Error(), "no self-signed serving certificate yet") {
		t.Errorf("Check before a CA: %v", err)
	}
	if c, err := certs.GetCertificate(nil); c != nil || err == nil {
		t.Error("a pending certificate served something")
	}
	if renewed, err := certs.RenewIfDue(time.Now().Add(10 * CAValidity)); renewed || err != nil {
		t.Errorf("renewed without a CA: %v %v", renewed, err)
	}
	ca, err := newSelfSignedCA(time.Now(), CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := ca.CertPEM()
	if err != nil {
		t.Fatal(err)
	}
	shared := &Shared{CA: ca, Bundle: bundle}
	if certs.Uses(shared) {
		t.Error("uses a CA it was never given")
	}
	if err := certs.Use(shared, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !certs.Uses(shared) || certs.Check() != nil {
		t.Errorf("after Use: uses %v, Check %v", certs.Uses(shared), certs.Check())
	}
	if err := handshake(t, certs.GetCertificate, bundle, "127.0.0.1"); err != nil {
		t.Errorf("not trusted through the CA it was given: %v", err)
	}
}

func TestNewestCACountsOnlyOurCAs(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ours, err := newSelfSignedCA(now, CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	older, err := newSelfSignedCA(now.Add(-time.Hour), CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's CA, newer than ours, never counts.
	theirs, err := NewCA(pkixName("someone-else-ca"), now.Add(time.Hour), CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	var bundle []byte
	for _, ca := range []*CA{older, theirs, ours} {
		pem, err := ca.CertPEM()
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, pem...)
	}
	if got := NewestCA(bundle); !got.Equal(ours.Cert.NotBefore) {
		t.Errorf("NewestCA = %s, want our newest CA's NotBefore %s", got, ours.Cert.NotBefore)
	}
	if got := NewestCA([]byte("not PEM")); !got.IsZero() {
		t.Errorf("NewestCA of garbage = %s, want zero", got)
	}
}
