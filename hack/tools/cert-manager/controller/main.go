// Command controller runs cert-manager's certificate controllers from the
// cert-manager module, for the tests of deploy/cert-manager. cert-manager's
// own controller main (cmd/controller) is a module of its own that the Go
// module proxy does not serve, so this small main wires the same library
// controllers: the self-signed and CA issuers, approval, and the
// Certificate lifecycle (trigger, key, request, issuing, readiness,
// revisions). ACME, Vault, Venafi and the ingress and gateway shims are
// left out: deploy/cert-manager uses none of them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca" // the issuers controller's CA and self-signed setup
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

var defaultControllers = []string{
	issuers.ControllerName, approver.ControllerName, crca.CRControllerName, crselfsigned.CRControllerName,
	trigger.ControllerName, keymanager.ControllerName, requestmanager.ControllerName, issuing.ControllerName,
	readiness.ControllerName, revisionmanager.ControllerName,
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	controllers := flag.String("controllers", strings.Join(defaultControllers, ","), "controllers to run")
	workers := flag.Int("workers", 5, "workers per controller (cert-manager's default)")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuers' Secrets")
	flag.Parse()
	logf.InitLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *kubeconfig, strings.Split(*controllers, ","), *workers, *clusterNS)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string, names []string, workers int, clusterNS string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: kubeconfig, KubernetesAPIQPS: 20, KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		// cert-manager's defaults: the back-off after a failed request.
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, n := range names {
		newController, ok := controller.Known()[n]
		if !ok {
			return fmt.Errorf("unknown controller %q", n)
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	// Informers start after every controller registered the ones it needs.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return g.Wait()
}
