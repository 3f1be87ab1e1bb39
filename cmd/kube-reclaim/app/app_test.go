package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/internal/docgen"
)

const module = "github.com/kube-reclaim/kube-reclaim/"

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
	imports := goListImports(t, "../../../internal/...")
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
	self := goListImports(t, ".")[module+"cmd/kube-reclaim/app"]
	for _, role := range rolePackages {
		if !slices.Contains(self, role) {
			t.Errorf("the listing does not see cmd/kube-reclaim/app import %s", role)
		}
	}
}

// goListImports maps every package matching pattern to what it and its
// tests import directly.
func goListImports(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	// go test puts its own go command first on PATH.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}
