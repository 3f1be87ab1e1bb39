package cluster

import (
	"context"
	"io"
	"path/filepath"
)

// certManagerTool builds cert-manager's controller and CA injector, which
// issue, renew and inject the webhook's certificate in the test of
// deploy/cert-manager, with the CRDs of the same release. The mains are
// small ones of hack/tools/cert-manager over cert-manager's library
// controllers: the release's own mains (cmd/controller, cmd/cainjector)
// are modules the Go module proxy does not serve.
var certManagerTool = tool{name: "cert-manager", module: "github.com/cert-manager/cert-manager",
	sources: []string{"hack/tools/cert-manager"},
	bins: map[string]string{
		"github.com/kube-reclaim/kube-reclaim/hack/tools/cert-manager/controller": "cert-manager-controller",
		"github.com/kube-reclaim/kube-reclaim/hack/tools/cert-manager/cainjector": "cert-manager-cainjector",
	},
	extra: []string{
		"deploy/crds/cert-manager.io_certificaterequests.yaml",
		"deploy/crds/cert-manager.io_certificates.yaml",
		"deploy/crds/cert-manager.io_clusterissuers.yaml",
		"deploy/crds/cert-manager.io_issuers.yaml",
		"deploy/crds/acme.cert-manager.io_challenges.yaml",
		"deploy/crds/acme.cert-manager.io_orders.yaml",
	}}

// CertManager are the absolute paths of the cached cert-manager controller,
// CA injector and CRD manifests.
type CertManager struct {
	Controller, CAInjector string
	CRDs                   []string
}

// EnsureCertManager returns the cached cert-manager binaries and CRDs,
// building them (minutes the first time) when missing.
func EnsureCertManager(ctx context.Context, log io.Writer) (*CertManager, error) {
	controller, err := ensureNodeTool(ctx, certManagerTool, "cert-manager-controller", log)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(controller)
	cm := &CertManager{Controller: controller, CAInjector: filepath.Join(dir, "cert-manager-cainjector")}
	for _, e := range certManagerTool.extra {
		cm.CRDs = append(cm.CRDs, filepath.Join(dir, filepath.Base(e)))
	}
	return cm, nil
}
