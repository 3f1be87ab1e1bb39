package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/test/importgraph"
)

const module = importgraph.Module

// policy is the formula the publisher, kubectl reclaim simulate and the
// replay share. It works on plain values, so it must not pull in client-go
// or any package of the module but reclaimable, nor import the API types
// itself (reclaimable reads pods for everyone). apimachinery (label
// selectors, quantities in the policy file) is allowed.
func TestPolicyImportsNoClientNorAPITypesNorRoles(t *testing.T) {
	if bad := forbiddenPolicyDeps(importgraph.Imports(t, module+"/policy"), importgraph.Deps(t, module+"/policy")); len(bad) > 0 {
		t.Errorf("policy depends on %v; it may import only apimachinery and, of this module, reclaimable", bad)
	}
	// Positive control: the same check flags what the publisher depends on.
	bad := forbiddenPolicyDeps(importgraph.Imports(t, module+"/publisher"), importgraph.Deps(t, module+"/publisher"))
	for _, want := range []string{"k8s.io/client-go", "k8s.io/api/", module + "/internal/"} {
		if !slices.ContainsFunc(bad, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("the check does not flag the publisher's dependency on %s* (flagged %v)", want, bad)
		}
	}
}

// forbiddenPolicyDeps returns what policy may not depend on: of its direct
// imports the API types, of all its dependencies client-go and the module's
// packages but reclaimable.
func forbiddenPolicyDeps(imports, deps []string) []string {
	var bad []string
	for _, p := range imports {
		if strings.HasPrefix(p, "k8s.io/api/") {
			bad = append(bad, p)
		}
	}
	for _, p := range deps {
		if p == "k8s.io/client-go" || strings.HasPrefix(p, "k8s.io/client-go/") ||
			strings.HasPrefix(p, module+"/") && p != module+"/reclaimable" && p != module+"/policy" {
			bad = append(bad, p)
		}
	}
	return bad
}
