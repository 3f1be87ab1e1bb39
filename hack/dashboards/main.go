// Command dashboards writes the Grafana dashboards of
// deploy/components/monitoring from internal/dashboards. Run it from the
// repository root: go run ./hack/dashboards
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kube-reclaim/kube-reclaim/internal/dashboards"
)

func main() {
	files, err := dashboards.Build()
	if err != nil {
		fail(err)
	}
	for _, f := range files {
		p := filepath.Join(dashboards.Dir, f.Name)
		if err := os.WriteFile(p, f.JSON, 0o644); err != nil {
			fail(err)
		}
		fmt.Println("wrote", p)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
