// Command docgen writes docs/reference.md (see internal/docgen) for the
// roles of the kube-reclaim command.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kube-reclaim/kube-reclaim/cmd/kube-reclaim/app"
	"github.com/kube-reclaim/kube-reclaim/internal/docgen"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

func main() {
	root, err := cluster.RepoRoot()
	if err == nil {
		var doc string
		if doc, err = docgen.Generate(root, app.Roles()); err == nil {
			err = os.WriteFile(filepath.Join(root, "docs", "reference.md"), []byte(doc), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
