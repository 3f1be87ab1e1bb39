package cluster

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes to path a kubeconfig of one context: the API server
// at server, trusted through caPEM, reached as user with auth.
func writeKubeconfig(path, server string, caPEM []byte, user string, auth *clientcmdapi.AuthInfo) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos[user] = auth
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}

// WriteKubeconfig writes to path a kubeconfig of the cluster's API server
// that authenticates with auth (a client certificate of c.CA(), a token, or
// Impersonating), for a test that acts as an identity other than the admin.
func (c *Cluster) WriteKubeconfig(path, user string, auth *clientcmdapi.AuthInfo) error {
	return writeKubeconfig(path, c.restConfig.Host, c.ca.CertPEM, user, auth)
}

// Impersonating is the admin's credential acting as user in groups, as a
// token of that user would authenticate.
func (c *Cluster) Impersonating(user string, groups ...string) *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{Token: adminToken, Impersonate: user, ImpersonateGroups: groups}
}
