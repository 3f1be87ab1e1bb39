package promserver

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Rule is one rule of a PrometheusRule: a recording rule (Record) or an
// alert (Alert, with its For).
type Rule struct {
	Group, Record, Alert, Expr string
	For                        time.Duration
}

// RuleFile returns the groups of a monitoring.coreos.com/v1 PrometheusRule
// as a Prometheus rules file, as the operator mounts them, with every
// group's interval set to interval (a test's short evaluation interval;
// empty keeps the groups' own), and the rules it holds.
func RuleFile(pr *unstructured.Unstructured, interval string) ([]byte, []Rule, error) {
	if pr.GetKind() != "PrometheusRule" {
		return nil, nil, fmt.Errorf("%s %s/%s: not a PrometheusRule", pr.GetKind(), pr.GetNamespace(), pr.GetName())
	}
	groups, ok, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil {
		return nil, nil, fmt.Errorf("PrometheusRule %s/%s: spec.groups: %w", pr.GetNamespace(), pr.GetName(), err)
	}
	if !ok || len(groups) == 0 {
		return nil, nil, fmt.Errorf("PrometheusRule %s/%s: no spec.groups", pr.GetNamespace(), pr.GetName())
	}
	var rules []Rule
	for i, g := range groups {
		group, ok := g.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("group %d is not an object", i)
		}
		if interval != "" {
			group["interval"] = interval
		}
		name, _ := group["name"].(string)
		list, _ := group["rules"].([]any)
		for j, r := range list {
			rule, ok := r.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("group %s: rule %d is not an object", name, j)
			}
			out := Rule{Group: name}
			out.Record, _ = rule["record"].(string)
			out.Alert, _ = rule["alert"].(string)
			out.Expr, _ = rule["expr"].(string)
			if f, ok := rule["for"].(string); ok {
				d, err := model.ParseDuration(f)
				if err != nil {
					return nil, nil, fmt.Errorf("group %s, rule %s%s: for: %w", name, out.Record, out.Alert, err)
				}
				out.For = time.Duration(d)
			}
			if (out.Record == "") == (out.Alert == "") || out.Expr == "" {
				return nil, nil, fmt.Errorf("group %s: rule %d needs one of record and alert, and expr", name, j)
			}
			rules = append(rules, out)
		}
	}
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		return nil, nil, err
	}
	return data, rules, nil
}

// Alert returns the alert named name of rules.
func Alert(rules []Rule, name string) (Rule, error) {
	i := slices.IndexFunc(rules, func(r Rule) bool { return r.Alert == name })
	if i < 0 {
		return Rule{}, errors.New("no alert " + name)
	}
	return rules[i], nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
