package cluster

import (
	"context"
	"io"
)

// prometheusTool builds the Prometheus server from promtool's wrapper
// module, so that the server that evaluates the shipped rules in the tests
// is the version promtool checks them with, pinned by the same go.sum.
//
// remove_all_sd with enable_kubernetes_sd keeps the one service discovery
// the tests use (the pod role, as the Prometheus operator configures a
// PodMonitor) and leaves out the others and the cloud SDKs behind them.
// Without builtinassets the web UI is not embedded: the tests use the HTTP
// API only.
var prometheusTool = tool{name: "prometheus", dir: "hack/tools/promtool", module: "github.com/prometheus/prometheus",
	tags: "remove_all_sd,enable_kubernetes_sd",
	bins: map[string]string{"github.com/prometheus/prometheus/cmd/prometheus": "prometheus"}}

// EnsurePrometheus returns the cached Prometheus server, building it when
// missing.
func EnsurePrometheus(ctx context.Context, log io.Writer) (string, error) {
	return ensureNodeTool(ctx, prometheusTool, "prometheus", log)
}
