package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// kube-proxy's ports on the node IP (each node has a network of its own).
const (
	kubeProxyHealthzPort = 10256
	kubeProxyMetricsPort = 10249
)

// writeKubeProxyFiles writes kube-proxy's configuration and kubeconfig. Its
// credential is a client certificate for system:kube-proxy, the user the
// apiserver's bootstrap policy binds to system:node-proxier (read Services,
// EndpointSlices and Nodes, write Events): what kube-proxy needs, no more.
func (n *RealNode) writeKubeProxyFiles() error {
	kp, err := n.c.ca.Issue(CertSpec{CommonName: "system:kube-proxy", Client: true})
	if err != nil {
		return err
	}
	cert, key, err := kp.Write(n.Dir, "kube-proxy-client")
	if err != nil {
		return err
	}
	auth := &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	if err := writeKubeconfig(n.path("kube-proxy.kubeconfig"), n.apiServer(), n.c.ca.CertPEM, "kube-proxy", auth); err != nil {
		return err
	}
	zero := "0s"
	cfg, err := yaml.Marshal(map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "iptables",
		"hostnameOverride":   n.Name,
		"clusterCIDR":        ClusterCIDR,
		"bindAddress":        n.net.nodeIP,
		"healthzBindAddress": fmt.Sprintf("%s:%d", n.net.nodeIP, kubeProxyHealthzPort),
		"metricsBindAddress": fmt.Sprintf("%s:%d", n.net.nodeIP, kubeProxyMetricsPort),
		"nodePortAddresses":  []string{"primary"},
		"clientConnection": map[string]any{
			"kubeconfig": n.path("kube-proxy.kubeconfig"),
		},
		// Every conntrack setting left as the kernel has it: nf_conntrack_max
		// and the hash size are the whole machine's, not the namespace's.
		// (Conntrack entries are cleaned through netlink; kube-proxy v1.34
		// needs no conntrack binary.)
		"conntrack": map[string]any{
			"maxPerCore": 0, "min": 0,
			"tcpEstablishedTimeout": zero, "tcpCloseWaitTimeout": zero,
			"udpTimeout": zero, "udpStreamTimeout": zero,
		},
		// The process cannot lower its OOM score (no CAP_SYS_RESOURCE).
		"oomScoreAdj": 0,
		"iptables":    map[string]any{"syncPeriod": "30s", "minSyncPeriod": "1s"},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(n.path("kube-proxy.yaml"), cfg, 0o644)
}

// startKubeProxy runs kube-proxy in the node's network namespace (its
// iptables rules are that namespace's) and waits until it reports healthy,
// that is, it has programmed the rules of the Services it found.
func (n *RealNode) startKubeProxy(ctx context.Context) error {
	// A private /run: iptables takes its lock file there.
	script := n.privateNamespaceScript([]string{"/run"}, "", false)
	bin, args := n.command("unshare", "-m", "--propagation", "unchanged", "--",
		"/bin/sh", "-c", script, n.kubeProxyBin, "--config="+n.path("kube-proxy.yaml"), "--v=2")
	if err := n.c.StartProcess(kubeProxyName(n.Name), bin, args...); err != nil {
		return err
	}
	n.kubeProxy = n.c.Process(kubeProxyName(n.Name))
	url := fmt.Sprintf("http://%s:%d/healthz", n.net.nodeIP, kubeProxyHealthzPort)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !n.kubeProxy.Running() {
			return false, errors.New("kube-proxy exited")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		res, err := hc.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, nil
	})
}

// KubeProxy is the node's kube-proxy (nil without a NetworkNamespace).
func (n *RealNode) KubeProxy() *Process { return n.kubeProxy }
