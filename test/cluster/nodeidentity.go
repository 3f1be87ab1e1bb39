package cluster

import (
	"fmt"

	"k8s.io/client-go/rest"
)

// NodeRESTConfig returns a client configuration that authenticates as the
// kubelet of node name: a client certificate CN=system:node:<name>,
// O=system:nodes, signed by the cluster's client CA, and no other group. Its
// requests are judged as a kubelet's: by the Node authorizer (RBAC grants
// system:nodes nothing) and the NodeRestriction admission plugin, so it may
// change its own Node only.
func (c *Cluster) NodeRESTConfig(name string) (*rest.Config, error) {
	if name == "" {
		return nil, fmt.Errorf("a node identity needs a node name")
	}
	kp, err := c.ca.Issue(CertSpec{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		return nil, fmt.Errorf("issuing the client certificate of node %s: %w", name, err)
	}
	cfg := rest.AnonymousClientConfig(c.restConfig)
	cfg.CertData, cfg.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg, nil
}
