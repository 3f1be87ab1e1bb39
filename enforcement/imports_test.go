package enforcement

import (
	"slices"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/test/importgraph"
)

// enforcement is pure: the webhook, the extender and kubectl reclaim import
// it, so it must not pull in client-go or any role's package.
func TestEnforcementImportsOnlyAPITypesAndReclaimable(t *testing.T) {
	deps := importgraph.Deps(t, "github.com/kube-reclaim/kube-reclaim/enforcement")
	var bad []string
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/client-go") ||
			(strings.HasPrefix(p, "github.com/kube-reclaim/kube-reclaim/") &&
				p != "github.com/kube-reclaim/kube-reclaim/reclaimable" &&
				p != "github.com/kube-reclaim/kube-reclaim/enforcement") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("enforcement depends on %v; it may import only k8s.io/api, k8s.io/apimachinery and reclaimable", bad)
	}
	// Positive control: the same listing sees the webhook's client-go.
	if !slices.ContainsFunc(importgraph.Deps(t, "github.com/kube-reclaim/kube-reclaim/webhook"), func(p string) bool {
		return strings.HasPrefix(p, "k8s.io/client-go")
	}) {
		t.Error("the check does not see the webhook's dependency on client-go")
	}
}
