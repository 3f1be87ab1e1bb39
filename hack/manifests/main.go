// Command manifests renders every kustomize overlay of deploy/ to one YAML
// file per overlay, dist/<overlay>.yaml (`make manifests`), with the
// kustomize Go API: no kubectl or kustomize binary needed.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kube-reclaim/kube-reclaim/deploy"
)

func main() {
	out := flag.String("o", "dist", "output directory")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, overlay := range deploy.Overlays {
		b, err := deploy.Render(overlay)
		if err != nil {
			return err
		}
		header := fmt.Sprintf("# kube-reclaim, deploy/%s rendered by `make manifests`; do not edit.\n"+
			"# kubectl apply --server-side -f %s.yaml\n", overlay, overlay)
		path := filepath.Join(out, overlay+".yaml")
		if err := os.WriteFile(path, append([]byte(header), b...), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
