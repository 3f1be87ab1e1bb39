package cluster

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A kubeconfig written for another identity reaches the cluster's API
// server, trusts its CA and carries that identity's credential, whichever
// kind it is.
func TestWriteKubeconfigCarriesTheServerTheCAAndTheIdentity(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{ca: ca, restConfig: &rest.Config{Host: "https://127.0.0.1:6443"}}
	for _, tc := range []struct {
		name  string
		auth  *clientcmdapi.AuthInfo
		check func(*rest.Config) bool
	}{
		{"client certificate", &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")},
			func(r *rest.Config) bool {
				return string(r.CertData) == "cert" && string(r.KeyData) == "key" && r.BearerToken == ""
			}},
		{"impersonation", c.Impersonating("system:serviceaccount:ns:sa", "system:serviceaccounts", "system:authenticated"),
			func(r *rest.Config) bool {
				return r.BearerToken == adminToken && r.Impersonate.UserName == "system:serviceaccount:ns:sa" &&
					slices.Equal(r.Impersonate.Groups, []string{"system:serviceaccounts", "system:authenticated"})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := c.WriteKubeconfig(path, "someone", tc.auth); err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != "https://127.0.0.1:6443" || !bytes.Equal(got.CAData, ca.CertPEM) {
				t.Errorf("kubeconfig points at %s trusting %d bytes of CA, want the cluster's server and CA", got.Host, len(got.CAData))
			}
			if !tc.check(got) {
				t.Errorf("kubeconfig carries the wrong identity: %+v", got)
			}
		})
	}
}
