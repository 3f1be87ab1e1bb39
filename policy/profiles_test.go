package policy

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func mustProfile(t *testing.T, name string, ns, pod *metav1.LabelSelector, scheduler, priority string) Profile {
	t.Helper()
	p, err := NewProfile(name, ns, pod, scheduler, priority)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileSelection(t *testing.T) {
	cfg := &Config{Default: DefaultSettings(), Profiles: []Profile{
		mustProfile(t, "spark", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "data"}},
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "spark"}}, "reclaim-scheduler", "batch-low"),
		mustProfile(t, "data-any", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"data", "ml"}}}}, nil, "", ""),
		mustProfile(t, "everywhere-except-prod",
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}, "", ""),
	}}
	cases := []struct {
		name      string
		ns, pod   map[string]string
		wantMatch string
	}{
		{"a pod matching two profiles gets the first in file order", map[string]string{"team": "data"}, map[string]string{"app": "spark", "tier": "x"}, "spark"},
		{"the pod selector narrows the first profile", map[string]string{"team": "data"}, map[string]string{"app": "flink"}, "data-any"},
		{"an absent pod selector selects every pod of the namespaces", map[string]string{"team": "ml"}, nil, "data-any"},
		{"a pod no profile selects gets none", map[string]string{"team": "web", "env": "prod"}, map[string]string{"tier": "x"}, ""},
		{"NotIn matches a namespace without the key", nil, map[string]string{"tier": "x"}, "everywhere-except-prod"},
		{"Exists needs the key on the pod", map[string]string{"env": "dev"}, map[string]string{"app": "spark"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if p := cfg.Profile(tc.ns, tc.pod); p != nil {
				got = p.Name
			}
			if got != tc.wantMatch {
				t.Errorf("Profile = %q, want %q", got, tc.wantMatch)
			}
		})
	}
	first := cfg.Profiles[0]
	if first.SchedulerName != "reclaim-scheduler" || first.PriorityClassName != "batch-low" ||
		!reflect.DeepEqual(first.PodSelector.MatchLabels, map[string]string{"app": "spark"}) {
		t.Errorf("first profile built as %+v", first)
	}
}

func TestNoProfilesSelectNothing(t *testing.T) {
	if p := Default().Profile(nil, map[string]string{"a": "b"}); p != nil {
		t.Errorf("the defaults have no profile, got %+v", p)
	}
}

func TestProfileAbsentAndEmptySelectorsMatchEverything(t *testing.T) {
	for name, sel := range map[string]*metav1.LabelSelector{"absent": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			cfg := &Config{Profiles: []Profile{mustProfile(t, "all", sel, sel, "", "")}}
			if p := cfg.Profile(map[string]string{"x": "y"}, nil); p == nil || p.Name != "all" {
				t.Errorf("%s selectors should match every pod, got %+v", name, p)
			}
		})
	}
}

func TestNewProfileRefusesAnInvalidSelector(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Equals", Values: []string{"v"}}}}
	if _, err := NewProfile("a", nil, bad, "", ""); err == nil {
		t.Error("an invalid operator must be refused")
	}
	// Positive control: the same selector with a valid operator is taken.
	bad.MatchExpressions[0].Operator = metav1.LabelSelectorOpIn
	if _, err := NewProfile("a", nil, bad, "", ""); err != nil {
		t.Errorf("a valid selector is refused: %v", err)
	}
}
