package importgraph

import (
	"slices"
	"testing"
)

func TestDepsListTransitiveImportsWithoutThePackage(t *testing.T) {
	self := Module + "/test/importgraph"
	deps := Deps(t, self)
	for _, want := range []string{"os/exec", "testing", "syscall"} { // syscall only through os/exec
		if !slices.Contains(deps, want) {
			t.Errorf("Deps(%s) misses %s: %v", self, want, deps)
		}
	}
	if slices.Contains(deps, self) {
		t.Errorf("Deps lists the package itself")
	}
	if got := Imports(t, self); !slices.Equal(got, []string{"os/exec", "strings", "testing"}) {
		t.Errorf("Imports(%s) = %v, want its three direct imports", self, got)
	}
	if got := ModuleDeps(t, self); len(got) != 0 {
		t.Errorf("ModuleDeps(%s) = %v, want none", self, got)
	}
	// Positive control: the filter keeps what the module's packages import of it.
	if got := ModuleDeps(t, Module+"/policy"); !slices.Contains(got, Module+"/reclaimable") {
		t.Errorf("ModuleDeps(policy) = %v, want reclaimable in it", got)
	}
	// ImportsByPackage leaves the tests' imports out, ImportsWithTests keeps them.
	if got := ImportsByPackage(t, self)[self]; !slices.Equal(got, []string{"os/exec", "strings", "testing"}) {
		t.Errorf("ImportsByPackage(%s) = %v, want its three direct imports", self, got)
	}
	if got := ImportsWithTests(t, self)[self]; !slices.Contains(got, "slices") {
		t.Errorf("ImportsWithTests(%s) = %v, want its test's import of slices in it", self, got)
	}
}
