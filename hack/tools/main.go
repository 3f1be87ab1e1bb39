// Command tools builds and caches the pinned control-plane binaries and
// kubelet, kube-proxy, kubectl, kube-reclaim-scheduler, cert-manager, promtool
// and the Prometheus server, and installs the container runtime real nodes
// need (make tools).
// The wrapper modules beside this file pin each component's version.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

func main() {
	ctx := context.Background()
	b, err := cluster.EnsureBinaries(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	kubelet, err := cluster.EnsureKubelet(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	kubeProxy, err := cluster.EnsureKubeProxy(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	kubectl, err := cluster.EnsureKubectl(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	if _, err := cluster.EnsureCertManager(ctx, os.Stdout); err != nil {
		fail(err)
	}
	pluginScheduler, err := cluster.EnsurePluginScheduler(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	if _, err := cluster.EnsurePromtool(ctx, os.Stdout); err != nil {
		fail(err)
	}
	prometheus, err := cluster.EnsurePrometheus(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	rt, err := cluster.EnsureNodePackages(ctx, os.Stdout)
	if err != nil {
		fail(err)
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kwok, b.MetricsServer,
		kubelet, kubeProxy, kubectl, pluginScheduler, prometheus, rt.Containerd, rt.Runc} {
		fmt.Println(p)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
