package certauthority

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"
)

func pkixName(cn string) pkix.Name { return pkix.Name{CommonName: cn} }

func TestIssuedLeafCarriesItsSpecAndChainsToTheCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(pkixName("test-ca"), now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: isCA %v maxPathLenZero %v usage %b", ca.Cert.IsCA, ca.Cert.MaxPathLenZero, ca.Cert.KeyUsage)
	}
	for _, c := range []struct {
		name  string
		spec  Spec
		usage []x509.ExtKeyUsage
	}{
		{"server", Spec{CommonName: "kube-apiserver", Hosts: []string{"localhost", "127.0.0.1", "::1"}, Server: true, Validity: time.Hour},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{"client", Spec{CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true, Validity: time.Hour},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert, err := ca.Issue(c.spec, now)
			if err != nil {
				t.Fatal(err)
			}
			leaf := cert.Leaf
			if leaf.Subject.CommonName != c.spec.CommonName || strings.Join(leaf.Subject.Organization, ",") != strings.Join(c.spec.Organization, ",") {
				t.Errorf("subject %s", leaf.Subject)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: c.usage}); err != nil {
				t.Errorf("does not chain to its CA for %v: %v", c.usage, err)
			}
			if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != c.usage[0] {
				t.Errorf("usages %v, want %v", leaf.ExtKeyUsage, c.usage)
			}
			var ips []string
			for _, ip := range leaf.IPAddresses {
				ips = append(ips, ip.String())
			}
			if len(c.spec.Hosts) > 0 && (strings.Join(leaf.DNSNames, ",") != "localhost" || strings.Join(ips, ",") != "127.0.0.1,::1") {
				t.Errorf("DNS names %v, IPs %v, want the hosts split into both", leaf.DNSNames, ips)
			}
			if d := leaf.NotAfter.Sub(now); d < time.Hour-time.Second || d > time.Hour {
				t.Errorf("valid until %s, want now + an hour", leaf.NotAfter)
			}
		})
	}
}

func TestIssuedLeafNeverOutlivesItsCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(pkixName("short-ca"), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(Spec{CommonName: "leaf", Server: true, Validity: 24 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf valid until %s beyond its CA's %s", cert.Leaf.NotAfter, ca.Cert.NotAfter)
	}
}

func TestEncodedKeyPairLoadsAsTheSamePair(t *testing.T) {
	ca, err := NewCA(pkixName("test-ca"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(Spec{CommonName: "localhost", Hosts: []string{"localhost"}, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := EncodeKeyPair(cert)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the PEM does not load: %v", err)
	}
	if !pair.Leaf.Equal(cert.Leaf) {
		t.Error("the loaded certificate differs from the issued one")
	}
}

func TestRenewalIsDueAfterTwoThirdsOfTheValidity(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(30 * time.Hour)}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, false}, {20*time.Hour - time.Second, false}, {20 * time.Hour, true}, {31 * time.Hour, true}} {
		if got := RenewalDue(leaf, start.Add(c.at)); got != c.want {
			t.Errorf("%s in: due %v, want %v", c.at, got, c.want)
		}
	}
}

func TestExpiredServingCertificateFailsTheCheck(t *testing.T) {
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: end.Add(-time.Hour), NotAfter: end}
	if err := CheckExpiry(leaf, end); err != nil {
		t.Errorf("at its last second: %v", err)
	}
	if err := CheckExpiry(leaf, end.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "serving certificate expired at") {
		t.Errorf("after it: %v", err)
	}
}
