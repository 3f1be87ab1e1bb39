package policyfile

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

const versioned = "apiVersion: kube-reclaim.io/v1alpha1\nkind: ReclaimPolicy\n"

// fieldErrors returns the *field.Error of an error from Parse.
func fieldErrors(t *testing.T, err error) []*field.Error {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error %v (%T) is not an aggregate of field errors", err, err)
	}
	var out []*field.Error
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("error %v (%T) is not a *field.Error", e, e)
		}
		out = append(out, fe)
	}
	return out
}

func TestUnversionedAndV1alpha1FilesLoadTheSameSettings(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"a default block", "default:\n  policy: request\n  window: 10m\n  cpu: {margin: 0.2}\n"},
		{"every setting", "default:\n  policy: max-usage-request\n  window: 10m\n  peak: p99\n  sampleAlignment: 5s\n" +
			"  changeThreshold: 0.2\n  memory: {minimum: 1e9, maxRatio: 0.8}\n"},
		{"pools inheriting the default block", "default: {cpu: {margin: 0.5}}\npools:\n" +
			"- {name: a, nodeSelector: {kube-reclaim.io/pool: a}, window: 20m, memory: {margin: 0}}\n" +
			"- {name: b, nodeSelector: {zone: b}, peak: p95}\n"},
		{"profiles", "profiles:\n- name: spark\n  namespaceSelector: {matchLabels: {team: data}}\n" +
			"  podSelector: {matchExpressions: [{key: app, operator: In, values: [spark]}]}\n  schedulerName: s\n- name: all\n"},
		{"only pools", "pools: [{name: p, nodeSelector: {k: v}, policy: request}]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, oldWarnings, err := Parse([]byte(tc.body))
			if err != nil {
				t.Fatalf("unversioned: %v", err)
			}
			cur, curWarnings, err := Parse([]byte(versioned + tc.body))
			if err != nil {
				t.Fatalf("v1alpha1: %v", err)
			}
			if !reflect.DeepEqual(old, cur) {
				t.Errorf("unversioned loads %+v\nv1alpha1 loads %+v", old, cur)
			}
			if !reflect.DeepEqual(oldWarnings, []string{UnversionedWarning}) || !strings.Contains(oldWarnings[0], "apiVersion: kube-reclaim.io/v1alpha1") {
				t.Errorf("unversioned warnings %q, want one naming the new form", oldWarnings)
			}
			if len(curWarnings) != 0 {
				t.Errorf("v1alpha1 warnings %q, want none", curWarnings)
			}
			// Positive control: the bodies differ from the defaults, so an
			// equal pair is not two ignored files.
			if reflect.DeepEqual(cur, policy.Default()) {
				t.Errorf("the file loads to the defaults: %+v", cur)
			}
		})
	}
}

func TestExampleFileLoads(t *testing.T) {
	data, err := os.ReadFile("../../apis/policy/v1alpha1/testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := Parse(data)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("the example does not load cleanly: %v %q", err, warnings)
	}
	def := policy.DefaultSettings()
	if cfg.Default != def {
		t.Errorf("the example's default block should spell out the built-in defaults: got %+v", cfg.Default)
	}
	latency, batch := def, def
	latency.Policy, latency.CPU.MaxRatio = policy.PolicyRequest, 0.5
	batch.Peak, batch.CPU.Margin, batch.Memory.Margin = policy.Percentile(95), 0.2, 0.25
	want := []policy.Pool{
		{Name: "latency", NodeSelector: map[string]string{"kube-reclaim.io/pool": "latency"}, Settings: latency},
		{Name: "batch", NodeSelector: map[string]string{"node-restriction.kubernetes.io/kube-reclaim-pool": "batch"}, Settings: batch},
	}
	if !reflect.DeepEqual(cfg.Pools, want) {
		t.Errorf("pools = %+v\nwant %+v", cfg.Pools, want)
	}
	if p := cfg.Profile(map[string]string{"team": "data"}, map[string]string{"app": "flink"}); p == nil || p.Name != "data-batch" || p.PriorityClassName != "batch-low" {
		t.Errorf("a flink pod of team data should get data-batch, got %+v", p)
	}
	if len(cfg.Profiles) != 2 || cfg.NodeSettablePoolKeys("kube-reclaim.io") != nil {
		t.Errorf("profiles %+v, warnings %q", cfg.Profiles, cfg.NodeSettablePoolKeys("kube-reclaim.io"))
	}
}

func TestEmptyDocumentsGiveTheDefaults(t *testing.T) {
	docs := []string{"", "# nothing\n", "null", "default:\npools:\n", "default: {}\npools: []\n", versioned}
	for _, doc := range docs {
		if cfg, _, err := Parse([]byte(doc)); err != nil || !reflect.DeepEqual(cfg, policy.Default()) {
			t.Errorf("%q: got %+v, %v; want the defaults", doc, cfg, err)
		}
	}
}

func TestThreeMistakesAreReportedTogetherWithTheirPaths(t *testing.T) {
	_, _, err := Parse([]byte(versioned + `
default:
  cpu: {margin: 1.5}
pools:
- name: a
  nodeSelector: {k: v}
  window: 2h
- name: b
  nodeSelector: {k: w}
  memory: {margn: 0.1}
`))
	var got []string
	for _, fe := range fieldErrors(t, err) {
		got = append(got, fe.Field)
	}
	want := []string{"pools[1].memory.margn", "default.cpu.margin", "pools[0].window"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("error paths %q, want %q (error: %v)", got, want, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string // each error's full text, in order
	}{
		{"a wrong apiVersion", "apiVersion: kube-reclaim.io/v1\nkind: ReclaimPolicy\n",
			[]string{`apiVersion: Unsupported value: "kube-reclaim.io/v1": supported values: "kube-reclaim.io/v1alpha1"`}},
		{"an apiVersion without kind", "apiVersion: kube-reclaim.io/v1alpha1\n",
			[]string{`kind: Unsupported value: "": supported values: "ReclaimPolicy"`}},
		{"an unknown top-level field", versioned + "defaults: {}\n", []string{"defaults: Forbidden: unknown field"}},
		{"an unknown field in a pool's resource", "pools: [{name: a, nodeSelector: {k: v}, cpu: {margn: 0.3}}]",
			[]string{"pools[0].cpu.margn: Forbidden: unknown field"}},
		{"name and nodeSelector are not settings of the default block", "default: {name: x, nodeSelector: {a: b}}",
			[]string{"default.name: Forbidden: unknown field", "default.nodeSelector: Forbidden: unknown field"}},
		{"a field in the wrong case", "Default: {}", []string{"Default: Forbidden: unknown field"}},
		{"a margin written as a percentage string", `default: {cpu: {margin: "35%"}}`,
			[]string{`default.cpu.margin: Invalid value: "string": must be of type float64`}},
		{"a fractional minimum", "default: {cpu: {minimum: 1.5}}",
			[]string{`default.cpu.minimum: Invalid value: "number 1.5": must be of type int64`}},
		{"a label value that is not a string", "pools: [{name: a, nodeSelector: {x: y}}]",
			[]string{`pools.nodeSelector: Invalid value: "bool": must be of type string`}}, // encoding/json keeps no index or key
		{"a window given as a number of seconds is reported once", "default: {window: 300}",
			[]string{`default.window: Invalid value: "number": must be of type string`}},
		{"a document that is a list", "- a", []string{`: Invalid value: "array": must be of type v1alpha1.ReclaimPolicy`}},
		{"every error at once, each with its path", versioned + `
default:
  policy: fast
  window: -1m
  typo: 1
pools:
- {name: a, nodeSelector: {}}
- {name: a, nodeSelector: {k: v}, cpu: {margin: 1.5}}
profiles:
- {name: Bad_Name}
`, []string{
			"default.typo: Forbidden: unknown field",
			`default.policy: Unsupported value: "fast": supported values: "usage", "request", "max-usage-request"`,
			`default.window: Invalid value: "-1m0s": must be in (0s, 1h0m0s]`,
			"pools[0].nodeSelector: Required value: a pool needs at least one label to select its nodes",
			`pools[1].name: Duplicate value: "a"`,
			"pools[1].cpu.margin: Invalid value: 1.5: must be in [0,1)",
			`profiles[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := Parse([]byte(tc.doc))
			if cfg != nil {
				t.Errorf("Parse returned a configuration with the error %v", err)
			}
			var got []string
			for _, fe := range fieldErrors(t, err) {
				got = append(got, fe.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseRefusesWhatIsNotAPolicyFile(t *testing.T) {
	for name, doc := range map[string]string{
		"unbalanced brackets are not YAML":      "default: [",
		"a duplicate key is not YAML":           "default: {}\ndefault: {}\n",
		"tabs for indentation are not YAML":     "default:\n\tpolicy: usage\n",
		"a window that is not a duration":       "default: {window: 5 minutes}",
		"a window given as a number of seconds": "default: {window: 300}",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := Parse([]byte(doc))
			if err == nil || cfg != nil {
				t.Errorf("got %+v, %v; want an error", cfg, err)
			}
		})
	}
	// Positive control: the same shape with a valid duration loads.
	if cfg, _, err := Parse([]byte("default: {window: 5m}")); err != nil || cfg.Default.Window != 5*time.Minute {
		t.Errorf("a valid window: %+v, %v", cfg, err)
	}
}
