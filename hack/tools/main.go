// Command tools builds and caches the pinned control-plane binaries (make tools).
// The wrapper modules beside this file pin each component's version.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

func main() {
	b, err := cluster.EnsureBinaries(context.Background(), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kwok, b.MetricsServer} {
		fmt.Println(p)
	}
}
