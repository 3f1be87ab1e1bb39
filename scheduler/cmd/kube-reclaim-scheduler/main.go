// Command kube-reclaim-scheduler is kube-scheduler with kube-reclaim's
// placement plugin registered (package plugin): the second scheduler of the
// plugin topology, in place of kube-scheduler with the extender beside it.
// Its flags and configuration are kube-scheduler's; enable the plugin by
// name (KubeReclaim) in a profile.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/kube-reclaim/kube-reclaim/scheduler/plugin"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))))
}
