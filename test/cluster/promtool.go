package cluster

import (
	"context"
	"io"
	"path/filepath"
)

// promtoolTool builds promtool, which checks and unit-tests the alerting
// and recording rules of deploy/components/monitoring, and promqlnames,
// which lists the metric names a PromQL expression selects with the
// Prometheus parser. Both come from one wrapper module, so the Prometheus
// module (and the newer Kubernetes libraries it requires) stays out of
// kube-reclaim's go.mod.
//
// remove_all_sd leaves out Prometheus's service-discovery plugins and the
// cloud SDKs behind them, which rule checks and rule unit tests never use,
// so that a fresh machine does not compile them.
var promtoolTool = tool{name: "promtool", module: "github.com/prometheus/prometheus", tags: "remove_all_sd", bins: map[string]string{
	"github.com/prometheus/prometheus/cmd/promtool":                        "promtool",
	"github.com/kube-reclaim/kube-reclaim/hack/tools/promtool/promqlnames": "promqlnames",
}}

// Promtool are the absolute paths of the cached promtool and promqlnames.
type Promtool struct {
	Promtool, PromQLNames string
}

// EnsurePromtool returns the cached promtool and promqlnames, building them
// (a few minutes the first time) when missing.
func EnsurePromtool(ctx context.Context, log io.Writer) (*Promtool, error) {
	promtool, err := ensureNodeTool(ctx, promtoolTool, "promtool", log)
	if err != nil {
		return nil, err
	}
	return &Promtool{Promtool: promtool, PromQLNames: filepath.Join(filepath.Dir(promtool), "promqlnames")}, nil
}
