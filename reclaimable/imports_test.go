package reclaimable

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kube-reclaim/kube-reclaim"

// projectDeps lists the packages of this module that pkg depends on,
// directly or not, as the go command resolves them for this platform.
func projectDeps(t *testing.T, pkg string) []string {
	t.Helper()
	// go test puts its own go command first on PATH.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if (p == module || strings.HasPrefix(p, module+"/")) && p != pkg {
			deps = append(deps, p)
		}
	}
	return deps
}

// Every role imports reclaimable, so it sits at the bottom of the module: an
// import of any other package of the module from here would be a cycle in
// waiting and would drag that package into every binary.
func TestReclaimableImportsNoProjectPackage(t *testing.T) {
	if deps := projectDeps(t, module+"/reclaimable"); len(deps) > 0 {
		t.Errorf("reclaimable depends on project packages %v; it must import none", deps)
	}
	// Positive control: the same check sees policy's dependency on reclaimable.
	if deps := projectDeps(t, module+"/policy"); !slices.Contains(deps, module+"/reclaimable") {
		t.Errorf("the check does not see policy import reclaimable (got %v)", deps)
	}
}
