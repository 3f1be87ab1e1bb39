package policy

import (
	"reflect"
	"strings"
	"testing"
)

func TestProfileSelection(t *testing.T) {
	cfg, err := Load([]byte(`
profiles:
- name: spark
  namespaceSelector: {matchLabels: {team: data}}
  podSelector: {matchLabels: {app: spark}}
  schedulerName: reclaim-scheduler
  priorityClassName: batch-low
- name: data-any
  namespaceSelector:
    matchExpressions:
    - {key: team, operator: In, values: [data, ml]}
- name: everywhere-except-prod
  namespaceSelector:
    matchExpressions:
    - {key: env, operator: NotIn, values: [prod]}
  podSelector:
    matchExpressions:
    - {key: tier, operator: Exists}
`))
	if err != nil {
		t.Fatal(err)
	}
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
		t.Errorf("first profile decoded as %+v", first)
	}
	if cfg.Profiles[1].SchedulerName != "" || cfg.Profiles[1].PriorityClassName != "" {
		t.Errorf("unset scheduler/priority class should stay empty: %+v", cfg.Profiles[1])
	}
}

func TestProfilesAbsentMeansNone(t *testing.T) {
	for _, doc := range []string{"", "profiles:", "profiles: []", "default: {}"} {
		cfg, err := Load([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if len(cfg.Profiles) != 0 || cfg.Profile(nil, map[string]string{"a": "b"}) != nil {
			t.Errorf("%q: profiles %+v", doc, cfg.Profiles)
		}
	}
}

func TestProfileEmptySelectorsMatchEverything(t *testing.T) {
	cfg, err := Load([]byte(`profiles: [{name: all, namespaceSelector: {}, podSelector: {}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Profile(map[string]string{"x": "y"}, nil); p == nil || p.Name != "all" {
		t.Errorf("empty selectors should match every pod, got %+v", p)
	}
}

func TestLoadProfileErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"profiles that are not a list are rejected", "profiles: {name: a}",
			[]string{"profiles: must be a list, got a mapping"}},
		{"a profile that is not a mapping is rejected", "profiles: [a]",
			[]string{`profiles[0]: must be a mapping, got string "a"`}},
		{"a profile without a name is rejected", "profiles: [{podSelector: {}}]",
			[]string{"profiles[0].name: must not be empty"}},
		{"a profile name that is not a DNS label is rejected", "profiles: [{name: Batch_1}]",
			[]string{`profiles[0].name: "Batch_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{"duplicate profile names are rejected", "profiles: [{name: a}, {name: b}, {name: a}]",
			[]string{`profiles[2].name: duplicate profile name "a" (also profiles[0])`}},
		{"an unknown profile field is rejected", "profiles: [{name: a, nodeSelector: {k: v}}]",
			[]string{"profiles[0].nodeSelector: unknown field (known: name, namespaceSelector, podSelector, schedulerName, priorityClassName)"}},
		{"a selector written as a plain label map is rejected", "profiles: [{name: a, podSelector: {app: spark}}]",
			[]string{"profiles[0].podSelector.app: unknown field (known: matchLabels, matchExpressions)"}},
		{"a selector that is a list is rejected", "profiles: [{name: a, namespaceSelector: [a]}]",
			[]string{"profiles[0].namespaceSelector: must be a mapping, got a list"}},
		{"an invalid operator is rejected with its path", "profiles: [{name: a, podSelector: {matchExpressions: [{key: k, operator: Equals, values: [v]}]}}]",
			[]string{`profiles[0].podSelector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator`}},
		{"In without values is rejected", "profiles: [{name: a, podSelector: {matchExpressions: [{key: k, operator: In}]}}]",
			[]string{"profiles[0].podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"}},
		{"a typo inside an expression is rejected", "profiles: [{name: a, podSelector: {matchExpressions: [{key: k, operator: Exists, value: [v]}]}}]",
			[]string{`profiles[0].podSelector: not a label selector (matchLabels: map of strings, matchExpressions: list of {key, operator, values}): json: unknown field "value"`}},
		{"a label value that is not a string is rejected", "profiles: [{name: a, podSelector: {matchLabels: {on: yes}}}]",
			[]string{`profiles[0].podSelector: not a label selector (matchLabels: map of strings, matchExpressions: list of {key, operator, values}): json: cannot unmarshal bool into Go struct field LabelSelector.matchLabels of type string`}},
		{"an invalid label key is rejected", `profiles: [{name: a, namespaceSelector: {matchLabels: {"bad key": v}}}]`,
			[]string{`profiles[0].namespaceSelector.matchLabels: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{"an invalid scheduler name is rejected", "profiles: [{name: a, schedulerName: Not_A_Name}]",
			[]string{`profiles[0].schedulerName: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"a priority class name that is not a string is rejected", "profiles: [{name: a, priorityClassName: 5}]",
			[]string{"profiles[0].priorityClassName: must be a string, got number 5"}},
		{"every profile error is reported at once, with the rest of the file's", `
default: {cpu: {margin: 2}}
profiles:
- name: a
  podSelector: {matchExpressions: [{key: k, operator: Bogus}]}
  typo: 1
- name: a
  schedulerName: ""
- {}
`, []string{
			"default.cpu.margin: must be in [0,1), got 2",
			"profiles[0].typo: unknown field (known: name, namespaceSelector, podSelector, schedulerName, priorityClassName)",
			`profiles[0].podSelector.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator`,
			`profiles[1].name: duplicate profile name "a" (also profiles[0])`,
			`profiles[1].schedulerName: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			"profiles[2].name: must not be empty",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg)
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}
