package testobj

import (
	"slices"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/test/importgraph"
)

const self = importgraph.Module + "/internal/testobj"

// The builders panic on what they cannot build and carry test defaults, so
// no binary may contain them: only tests, and the test harness under test/
// that only tests run, import this package.
func TestOnlyTestsImportTestobj(t *testing.T) {
	for pkg, imports := range importgraph.ImportsByPackage(t, importgraph.Module+"/...") {
		if slices.Contains(imports, self) && !strings.HasPrefix(pkg, importgraph.Module+"/test/") {
			t.Errorf("%s imports %s outside its tests; build objects there without it", pkg, self)
		}
	}
	// Positive control: the listing of the tests' imports sees the
	// extender's tests import it.
	if got := importgraph.ImportsWithTests(t, importgraph.Module+"/extender")[importgraph.Module+"/extender"]; !slices.Contains(got, self) {
		t.Errorf("the listing does not see the extender's tests import %s (got %v)", self, got)
	}
}
