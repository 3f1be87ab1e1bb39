package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The committed dashboards are what Build generates: editing the JSON by
// hand, or the Go code without regenerating, fails here.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	files, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("..", "..", Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("%s holds %d dashboards, Build makes %d: run go run ./hack/dashboards", Dir, len(committed), len(files))
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", Dir, f.Name))
		if err != nil {
			t.Errorf("%v: run go run ./hack/dashboards", err)
			continue
		}
		if !bytes.Equal(got, f.JSON) {
			t.Errorf("%s/%s differs from what Build generates: run go run ./hack/dashboards", Dir, f.Name)
		}
	}
}

func TestPanelsHaveUniqueIDsAndQueries(t *testing.T) {
	files, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var d gDashboard
		if err := json.Unmarshal(f.JSON, &d); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", f.Name, p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f.Name, p.Title)
			}
			if p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: panel %q is wider than the dashboard", f.Name, p.Title)
			}
		}
	}
}

// selectorRe finds each series a query selects (the dashboards read only
// kube-reclaim's series, up and the process_ series) and its matchers.
var selectorRe = regexp.MustCompile(`\b(kube_reclaim[\w:]*|up|process_[a-z_]+)\b(\{[^}]*\})?`)

// unscoped returns the selectors of expr that lack a matcher of the
// dashboard's variables: cluster on every one; on a scoped dashboard,
// namespace and job too on series the roles export (a recording rule's,
// named with a colon, has aggregated them away).
func unscoped(expr string, scoped bool) []string {
	var bad []string
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		want := []string{`cluster=~"$cluster"`}
		if scoped && !strings.Contains(m[1], ":") {
			want = append(want, `namespace=~"$namespace"`, `job=~"$job"`)
		}
		for _, w := range want {
			if !strings.Contains(m[2], w) {
				bad = append(bad, m[0]+" lacks "+w)
			}
		}
	}
	return bad
}

// Every selector of every query is filtered by the dashboard's variables,
// as the kubernetes-mixin's are, and every variable a query uses is defined
// before it.
func TestEveryQueryIsScopedByTheDashboardVariables(t *testing.T) {
	// Positive controls: the check sees a selector without the variables.
	if bad := unscoped(`sum(rate(kube_reclaim_extender_filtered_nodes_total[5m])) / up{cluster=~"$cluster"}`, false); len(bad) != 1 {
		t.Errorf("unscoped found %q, want the filtered_nodes selector alone", bad)
	}
	if bad := unscoped(`kube_reclaim_publisher_is_leader{cluster=~"$cluster"}`, true); len(bad) != 2 {
		t.Errorf("unscoped found %q on a scoped dashboard, want namespace and job missing", bad)
	}
	files, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	varRe := regexp.MustCompile(`\$(\w+)`)
	for _, f := range files {
		var d gDashboard
		if err := json.Unmarshal(f.JSON, &d); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		defined := map[string]bool{}
		for _, v := range d.Templating.List {
			for _, used := range varRe.FindAllStringSubmatch(v.Query, -1) {
				if !defined[used[1]] {
					t.Errorf("%s: variable %s's query uses $%s, not defined before it", f.Name, v.Name, used[1])
				}
			}
			defined[v.Name] = true
		}
		if !defined["cluster"] {
			t.Errorf("%s: no cluster variable", f.Name)
		}
		scoped := defined["namespace"] && defined["job"]
		selectors := 0
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				selectors += len(selectorRe.FindAllString(q.Expr, -1))
				for _, bad := range unscoped(q.Expr, scoped) {
					t.Errorf("%s: panel %q: %s", f.Name, p.Title, bad)
				}
				for _, used := range varRe.FindAllStringSubmatch(q.Expr, -1) {
					if !defined[used[1]] {
						t.Errorf("%s: panel %q uses $%s, which is not a variable", f.Name, p.Title, used[1])
					}
				}
			}
		}
		if selectors == 0 {
			t.Errorf("%s: no selector found in its queries", f.Name)
		}
	}
}
