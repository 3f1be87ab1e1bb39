package reclaimable

import (
	"slices"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/test/importgraph"
)

const module = importgraph.Module

// Every role imports reclaimable, so it sits at the bottom of the module: an
// import of any other package of the module from here would be a cycle in
// waiting and would drag that package into every binary.
func TestReclaimableImportsNoProjectPackage(t *testing.T) {
	if deps := importgraph.ModuleDeps(t, module+"/reclaimable"); len(deps) > 0 {
		t.Errorf("reclaimable depends on project packages %v; it must import none", deps)
	}
	// Positive control: the same check sees policy's dependency on reclaimable.
	if deps := importgraph.ModuleDeps(t, module+"/policy"); !slices.Contains(deps, module+"/reclaimable") {
		t.Errorf("the check does not see policy import reclaimable (got %v)", deps)
	}
}
