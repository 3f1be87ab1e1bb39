package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/internal/docgen"
	"github.com/kube-reclaim/kube-reclaim/test/importgraph"
)

const module = importgraph.Module + "/"

// rolePackages are the packages of the roles; only this package (and the
// tests and tools above it) may assemble them.
var rolePackages = []string{module + "publisher", module + "webhook", module + "extender"}

func TestReferenceIsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	want, err := docgen.Generate(root, Roles())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/reference.md is out of date with the flags or the policy schema: run `go run ./hack/docgen`")
	}
}

func TestEveryRoleIsASubcommand(t *testing.T) {
	root := NewRootCommand()
	for _, r := range Roles() {
		cmd, _, err := root.Find([]string{r.Name})
		if err != nil || cmd.Name() != r.Name || cmd.Short != r.Short {
			t.Errorf("role %s: subcommand %v, %v", r.Name, cmd, err)
		}
	}
}

// internal/ holds leaf libraries: a package there that imported a role
// would be a second place assembling the roles (as internal/app and
// internal/docgen each did), and the roles could no longer import it.
func TestNoInternalPackageImportsARole(t *testing.T) {
	imports := importgraph.ImportsWithTests(t, "../../../internal/...")
	if len(imports) < 10 {
		t.Fatalf("go list found only %d packages under internal/", len(imports))
	}
	for pkg, deps := range imports {
		for _, role := range rolePackages {
			if slices.Contains(deps, role) {
				t.Errorf("%s imports %s (its code or its tests); take the roles as an argument instead", pkg, role)
			}
		}
	}
	// Positive control: the same listing sees this package's imports of the roles.
	self := importgraph.ImportsWithTests(t, ".")[module+"cmd/kube-reclaim/app"]
	for _, role := range rolePackages {
		if !slices.Contains(self, role) {
			t.Errorf("the listing does not see cmd/kube-reclaim/app import %s", role)
		}
	}
}
