package promserver

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func prometheusRule(t *testing.T, groups string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: r, namespace: mon}\nspec:\n  groups:\n" + groups
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRuleFileIsTheGroupsAtTheTestsIntervalAndListsTheRules(t *testing.T) {
	pr := prometheusRule(t, `    - name: rec
      interval: 30s
      rules:
        - record: a:sum
          expr: sum(a)
    - name: alerts
      rules:
        - alert: Down
          expr: absent(up == 1)
          for: 1h30m
        - alert: Now
          expr: vector(1)
`)
	for _, tc := range []struct {
		name, interval string
		wantIntervals  []string
	}{
		{"the groups' own intervals", "", []string{"30s", ""}},
		{"every group at the test's interval", "2s500ms", []string{"2s500ms", "2s500ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, rules, err := RuleFile(pr, tc.interval)
			if err != nil {
				t.Fatal(err)
			}
			var file struct {
				Groups []struct {
					Name     string           `json:"name"`
					Interval string           `json:"interval"`
					Rules    []map[string]any `json:"rules"`
				} `json:"groups"`
			}
			if err := yaml.UnmarshalStrict(data, &file); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if len(file.Groups) != 2 || len(file.Groups[1].Rules) != 2 {
				t.Fatalf("rules file:\n%s", data)
			}
			for i, g := range file.Groups {
				if g.Interval != tc.wantIntervals[i] {
					t.Errorf("group %s interval %q, want %q", g.Name, g.Interval, tc.wantIntervals[i])
				}
			}
			want := []Rule{{Group: "rec", Record: "a:sum", Expr: "sum(a)"},
				{Group: "alerts", Alert: "Down", Expr: "absent(up == 1)", For: 90 * time.Minute},
				{Group: "alerts", Alert: "Now", Expr: "vector(1)"}}
			if len(rules) != len(want) {
				t.Fatalf("rules %+v, want %+v", rules, want)
			}
			for i := range want {
				if rules[i] != want[i] {
					t.Errorf("rule %d: %+v, want %+v", i, rules[i], want[i])
				}
			}
			if _, err := Alert(rules, "Down"); err != nil {
				t.Error(err)
			}
			if _, err := Alert(rules, "a:sum"); err == nil {
				t.Error("a recording rule found as an alert")
			}
		})
	}
	// The object itself keeps its intervals.
	if g, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups"); g[0].(map[string]any)["interval"] != "30s" {
		t.Errorf("RuleFile changed the PrometheusRule: %v", g[0])
	}
}

func TestRuleFileRefusesWhatIsNotARuleGroup(t *testing.T) {
	for _, tc := range []struct{ name, groups, want string }{
		{"a rule both record and alert", "    - name: g\n      rules:\n        - {record: a, alert: B, expr: x}\n", "one of record and alert"},
		{"a rule without expr", "    - name: g\n      rules:\n        - {alert: B}\n", "one of record and alert, and expr"},
		{"a for that is no duration", "    - name: g\n      rules:\n        - {alert: B, expr: x, for: soon}\n", "for:"},
		{"no groups", "    []\n", "no spec.groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := RuleFile(prometheusRule(t, tc.groups), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
