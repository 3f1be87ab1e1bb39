// Package importgraph lists what a package of this module imports, directly
// or not, for the tests that keep the module's layering (a pure package pulls
// in no client, a leaf imports no other package of the module).
package importgraph

import (
	"os/exec"
	"strings"
	"testing"
)

// Module is this module's path.
const Module = "github.com/kube-reclaim/kube-reclaim"

// Imports returns the packages pkg imports directly (its tests' imports left
// out).
func Imports(t testing.TB, pkg string) []string {
	t.Helper()
	return goList(t, `{{join .Imports " "}}`, pkg)
}

// ImportsByPackage maps every package matching pattern to what its code
// imports directly (its tests' imports left out).
func ImportsByPackage(t testing.TB, pattern string) map[string][]string {
	t.Helper()
	return importLines(goListLines(t, `{{.ImportPath}} {{join .Imports " "}}`, pattern))
}

// ImportsWithTests maps every package matching pattern to what it and its
// tests (internal and external) import directly.
func ImportsWithTests(t testing.TB, pattern string) map[string][]string {
	t.Helper()
	return importLines(goListLines(t, `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, pattern))
}

// importLines maps the first word of each line to the others.
func importLines(lines []string) map[string][]string {
	m := make(map[string][]string, len(lines))
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

// Deps returns the packages pkg depends on, directly or not, as the go
// command resolves them for this platform; pkg itself is left out.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	var deps []string
	for _, p := range goList(t, "{{.ImportPath}}", "-deps", pkg) {
		if p != pkg {
			deps = append(deps, p)
		}
	}
	return deps
}

// ModuleDeps is Deps limited to the packages of this module.
func ModuleDeps(t testing.TB, pkg string) []string {
	t.Helper()
	var deps []string
	for _, p := range Deps(t, pkg) {
		if p == Module || strings.HasPrefix(p, Module+"/") {
			deps = append(deps, p)
		}
	}
	return deps
}

// goList runs go list -f format args... and returns the words it prints.
func goList(t testing.TB, format string, args ...string) []string {
	t.Helper()
	return strings.Fields(strings.Join(goListLines(t, format, args...), "\n"))
}

// goListLines runs go list -f format args... and returns its lines.
func goListLines(t testing.TB, format string, args ...string) []string {
	t.Helper()
	// go test puts its own go command first on PATH.
	out, err := exec.CommandContext(t.Context(), "go", append([]string{"list", "-f", format}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
