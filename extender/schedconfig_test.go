package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The field names below are copied from k8s.io/kube-scheduler/config/v1
// (KubeSchedulerConfiguration, Extender, ExtenderManagedResource) and the
// pre-1.23 scheduler Policy; decoding strictly into them catches a misspelt
// key, which kube-scheduler would reject at start-up.
type v1Extender struct {
	URLPrefix      string `json:"urlPrefix"`
	FilterVerb     string `json:"filterVerb,omitempty"`
	PreemptVerb    string `json:"preemptVerb,omitempty"`
	PrioritizeVerb string `json:"prioritizeVerb,omitempty"`
	Weight         int64  `json:"weight,omitempty"`
	BindVerb       string `json:"bindVerb,omitempty"`
	EnableHTTPS    bool   `json:"enableHTTPS,omitempty"`
	TLSConfig      *struct {
		Insecure   bool   `json:"insecure,omitempty"`
		ServerName string `json:"serverName,omitempty"`
		CAFile     string `json:"caFile,omitempty"`
	} `json:"tlsConfig,omitempty"`
	HTTPTimeout      string `json:"httpTimeout,omitempty"`
	NodeCacheCapable bool   `json:"nodeCacheCapable,omitempty"`
	ManagedResources []struct {
		Name               string `json:"name"`
		IgnoredByScheduler bool   `json:"ignoredByScheduler,omitempty"`
	} `json:"managedResources,omitempty"`
	Ignorable bool `json:"ignorable,omitempty"`
}

type v1Config struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	LeaderElection *struct {
		LeaderElect       bool   `json:"leaderElect"`
		ResourceName      string `json:"resourceName"`
		ResourceNamespace string `json:"resourceNamespace"`
	} `json:"leaderElection,omitempty"`
	Profiles []struct {
		SchedulerName            string `json:"schedulerName"`
		PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore,omitempty"`
		Plugins                  *struct {
			PostFilter struct {
				Disabled []struct {
					Name string `json:"name"`
				} `json:"disabled"`
			} `json:"postFilter"`
		} `json:"plugins,omitempty"`
		PluginConfig []struct {
			Name string `json:"name"`
			Args struct {
				ScoringStrategy struct {
					Type      string `json:"type"`
					Resources []struct {
						Name   string `json:"name"`
						Weight int64  `json:"weight"`
					} `json:"resources"`
				} `json:"scoringStrategy"`
			} `json:"args"`
		} `json:"pluginConfig,omitempty"`
	} `json:"profiles"`
	Extenders []v1Extender `json:"extenders"`
}

type legacyPolicy struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Extenders  []struct {
		URLPrefix        string `json:"urlPrefix"`
		FilterVerb       string `json:"filterVerb,omitempty"`
		PreemptVerb      string `json:"preemptVerb,omitempty"`
		PrioritizeVerb   string `json:"prioritizeVerb,omitempty"`
		Weight           int64  `json:"weight,omitempty"`
		BindVerb         string `json:"bindVerb,omitempty"`
		EnableHTTPS      bool   `json:"enableHttps,omitempty"`
		HTTPTimeout      int64  `json:"httpTimeout,omitempty"`
		NodeCacheCapable bool   `json:"nodeCacheCapable,omitempty"`
		ManagedResources []struct {
			Name               string `json:"name"`
			IgnoredByScheduler bool   `json:"ignoredByScheduler,omitempty"`
		} `json:"managedResources,omitempty"`
		Ignorable bool `json:"ignorable,omitempty"`
	} `json:"extenders"`
}

// wantExtender is the expected extender entry, written out by hand: no
// prioritizeVerb, the profile scores.
const wantExtenderJSON = `{"urlPrefix": "http://127.0.0.1:8888",
 "filterVerb": "filter", "bindVerb": "bind",
 "nodeCacheCapable": true, "httpTimeout": "5s",
 "managedResources": [{"name": "kube-reclaim.io/reclaimed-cpu", "ignoredByScheduler": true},
                      {"name": "kube-reclaim.io/reclaimed-memory", "ignoredByScheduler": true}]}`

func parseV1(t *testing.T, doc string) v1Config {
	t.Helper()
	var c v1Config
	if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
		t.Fatalf("strict decoding:\n%s\n%v", doc, err)
	}
	return c
}

func TestShippedSchedulerConfigMatchesGenerated(t *testing.T) {
	shipped, err := os.ReadFile("../deploy/scheduler/kube-scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	generated, err := KubeSchedulerConfigYAML(DefaultURLPrefix, "kube-reclaim.io")
	if err != nil {
		t.Fatal(err)
	}
	var wantExt v1Extender
	if err := json.Unmarshal([]byte(wantExtenderJSON), &wantExt); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{"shipped": string(shipped), "generated": generated} {
		c := parseV1(t, doc)
		if c.APIVersion != "kubescheduler.config.k8s.io/v1" || c.Kind != "KubeSchedulerConfiguration" {
			t.Errorf("%s: apiVersion/kind = %s/%s", name, c.APIVersion, c.Kind)
		}
		if len(c.Profiles) != 1 || c.Profiles[0].SchedulerName != "kube-reclaim-scheduler" {
			t.Errorf("%s: profiles = %+v", name, c.Profiles)
		} else if p := c.Profiles[0].PercentageOfNodesToScore; p == nil || *p != 5 {
			t.Errorf("%s: percentageOfNodesToScore = %v, want 5", name, p)
		} else {
			checkScoring(t, name, c.Profiles[0].PluginConfig, "LeastAllocated", "kube-reclaim.io")
			// No preemption: the scheduler may not delete pods.
			if pl := c.Profiles[0].Plugins; pl == nil || len(pl.PostFilter.Disabled) != 1 || pl.PostFilter.Disabled[0].Name != "DefaultPreemption" {
				t.Errorf("%s: plugins = %+v, want postFilter DefaultPreemption disabled", name, pl)
			}
		}
		if le := c.LeaderElection; le == nil || !le.LeaderElect || le.ResourceName != "kube-reclaim-scheduler" || le.ResourceNamespace != "kube-reclaim" {
			t.Errorf("%s: leaderElection = %+v, want its own lease", name, le)
		}
		if len(c.Extenders) != 1 || !reflect.DeepEqual(c.Extenders[0], wantExt) {
			t.Errorf("%s: extenders = %+v\nwant %+v", name, c.Extenders, wantExt)
		}
	}
	// Explicit false values are spelt out in both.
	for _, key := range []string{"enableHTTPS: false", "ignorable: false"} {
		for name, doc := range map[string]string{"shipped": string(shipped), "generated": generated} {
			if !contains(doc, key) {
				t.Errorf("%s lacks %q", name, key)
			}
		}
	}
}

func TestExtenderConfigForATestScheduler(t *testing.T) {
	// What a test or the demo feeds a real kube-scheduler: both profiles and
	// the extender on localhost, for another domain, over HTTPS.
	c := parseV1(t, testSchedulerConfig(t, "/tmp/ca dir/ca.crt", StrategyBinpack))
	if len(c.Profiles) != 2 || c.Profiles[0].SchedulerName != "default-scheduler" || c.Profiles[1].SchedulerName != "kube-reclaim-scheduler" {
		t.Fatalf("profiles = %+v", c.Profiles)
	}
	// Only the reclaimed profile scores fewer nodes and scores the
	// reclaimed resources; the other keeps kube-scheduler's defaults.
	if p := c.Profiles[0].PercentageOfNodesToScore; p != nil || c.Profiles[0].PluginConfig != nil {
		t.Errorf("default-scheduler percentageOfNodesToScore = %v, pluginConfig %+v, want neither", p, c.Profiles[0].PluginConfig)
	}
	if p := c.Profiles[1].PercentageOfNodesToScore; p == nil || *p != 5 {
		t.Errorf("kube-reclaim-scheduler percentageOfNodesToScore = %v, want 5", p)
	}
	checkScoring(t, "binpack profile", c.Profiles[1].PluginConfig, "MostAllocated", "example.com")
	e := c.Extenders[0]
	if e.URLPrefix != "https://127.0.0.1:9443" || !e.EnableHTTPS || e.ManagedResources[0].Name != "example.com/reclaimed-cpu" ||
		e.ManagedResources[1].Name != "example.com/reclaimed-memory" || e.TLSConfig == nil || e.TLSConfig.CAFile != "/tmp/ca dir/ca.crt" {
		t.Errorf("extender = %+v", e)
	}
	if _, err := ExtenderConfigYAML("http://x", "Not A Domain"); err == nil {
		t.Error("invalid domain accepted")
	}
	if _, err := ReclaimedProfile(SchedulerName, "Not A Domain", StrategySpread); err == nil {
		t.Error("ReclaimedProfile accepted an invalid domain")
	}
	if _, err := ReclaimedProfile(SchedulerName, "example.com", "random"); err == nil || !strings.Contains(err.Error(), `"random"`) {
		t.Errorf("ReclaimedProfile with an unknown strategy: %v, want an error naming it", err)
	}
	// Names YAML would misread are quoted.
	if got, err := ProfilesYAML(DefaultProfile("true"), DefaultProfile("8080")); err != nil || got != "profiles:\n- schedulerName: \"true\"\n- schedulerName: \"8080\"\n" {
		t.Errorf("ProfilesYAML = %q, %v", got, err)
	}
}

func TestShippedLegacyPolicyMatchesGenerated(t *testing.T) {
	shipped, err := os.ReadFile("../deploy/scheduler/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	generated, err := LegacyPolicyJSON(DefaultURLPrefix, "kube-reclaim.io")
	if err != nil {
		t.Fatal(err)
	}
	if string(shipped) != generated {
		t.Errorf("deploy/scheduler/policy.json differs from LegacyPolicyJSON:\n%s", generated)
	}
	var p legacyPolicy
	dec := json.NewDecoder(bytesReader(shipped))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "Policy" || p.APIVersion != "v1" || len(p.Extenders) != 1 {
		t.Fatalf("policy = %+v", p)
	}
	e := p.Extenders[0]
	if e.URLPrefix != "http://127.0.0.1:8888" || e.FilterVerb != "filter" || e.PrioritizeVerb != "prioritize" ||
		e.BindVerb != "bind" || e.Weight != 1 || e.EnableHTTPS || e.HTTPTimeout != 5_000_000_000 || !e.NodeCacheCapable || e.Ignorable ||
		len(e.ManagedResources) != 2 || e.ManagedResources[0].Name != "kube-reclaim.io/reclaimed-cpu" || !e.ManagedResources[0].IgnoredByScheduler ||
		e.ManagedResources[1].Name != "kube-reclaim.io/reclaimed-memory" || !e.ManagedResources[1].IgnoredByScheduler {
		t.Errorf("extender = %+v", e)
	}
}

// testSchedulerConfig is a configuration as a test or the demo feeds a real
// kube-scheduler: the default profile and the reclaimed one with strategy,
// and the extender over HTTPS on localhost with the CA in caFile, for the
// domain example.com.
func testSchedulerConfig(t *testing.T, caFile, strategy string) string {
	t.Helper()
	ext, err := ExtenderConfigYAMLWithCA("https://127.0.0.1:9443", "example.com", caFile)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := ReclaimedProfile(SchedulerName, "example.com", strategy)
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := ProfilesYAML(DefaultProfile("default-scheduler"), rp)
	if err != nil {
		t.Fatal(err)
	}
	return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + profiles + ext
}

// checkScoring checks that a profile's plugin configuration is exactly
// NodeResourcesFit scoring the reclaimed resources of domain with scoring.
func checkScoring(t *testing.T, what string, pc any, scoring, domain string) {
	t.Helper()
	got, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`[{"name":"NodeResourcesFit","args":{"scoringStrategy":{"type":%q,"resources":[{"name":"%s/reclaimed-cpu","weight":1},{"name":"%s/reclaimed-memory","weight":1}]}}}]`,
		scoring, domain, domain)
	if string(got) != want {
		t.Errorf("%s: pluginConfig %s\nwant %s", what, got, want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// The generated configuration decodes strictly, through the apimachinery
// serializer kube-scheduler uses, into the upstream
// KubeSchedulerConfiguration: a key the upstream types do not have, or one
// written twice, fails here. The shipped file is checked too.
func TestConfigDecodesStrictlyIntoUpstreamTypes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := configv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	decode := func(doc string) (*configv1.KubeSchedulerConfiguration, error) {
		obj, _, err := strict.Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, err
		}
		c, ok := obj.(*configv1.KubeSchedulerConfiguration)
		if !ok {
			return nil, fmt.Errorf("decoded a %T", obj)
		}
		return c, nil
	}
	// Positive control: the strict decoder does refuse an unknown key.
	if _, err := decode("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n- urlPrefix: http://x\n  enableHttps: true\n"); err == nil {
		t.Fatal("strict decoding accepted the legacy key enableHttps")
	}

	generated, err := KubeSchedulerConfigYAML(DefaultURLPrefix, "kube-reclaim.io")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile("../deploy/scheduler/kube-scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	test := testSchedulerConfig(t, "/tmp/ca.crt", StrategySpread)

	want := configv1.Extender{
		URLPrefix: DefaultURLPrefix, FilterVerb: "filter", BindVerb: "bind",
		HTTPTimeout: metav1.Duration{Duration: 5 * time.Second}, NodeCacheCapable: true,
		ManagedResources: []configv1.ExtenderManagedResource{
			{Name: "kube-reclaim.io/reclaimed-cpu", IgnoredByScheduler: true},
			{Name: "kube-reclaim.io/reclaimed-memory", IgnoredByScheduler: true},
		},
	}
	for name, doc := range map[string]string{"generated": generated, "shipped": string(shipped)} {
		c, err := decode(doc)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
			continue
		}
		if len(c.Extenders) != 1 || !reflect.DeepEqual(c.Extenders[0], want) {
			t.Errorf("%s: extenders = %+v\nwant %+v", name, c.Extenders, want)
		}
		le := c.LeaderElection
		if len(c.Profiles) != 1 || ptr.Deref(c.Profiles[0].SchedulerName, "") != SchedulerName || le.LeaderElect == nil || !*le.LeaderElect ||
			le.ResourceName != SchedulerName || le.ResourceNamespace != "kube-reclaim" {
			t.Errorf("%s: profiles %+v, leaderElection %+v", name, c.Profiles, le)
			continue
		}
		if pl := c.Profiles[0].Plugins; pl == nil || !reflect.DeepEqual(pl.PostFilter, configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "DefaultPreemption"}}}) {
			t.Errorf("%s: plugins %+v, want only DefaultPreemption disabled", name, pl)
		}
		// The plugin's args decode strictly into the upstream type too.
		pc := c.Profiles[0].PluginConfig
		if len(pc) != 1 || pc[0].Name != "NodeResourcesFit" {
			t.Errorf("%s: pluginConfig %+v, want NodeResourcesFit's", name, pc)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(pc[0].Args.Raw))
		dec.DisallowUnknownFields()
		var args configv1.NodeResourcesFitArgs
		if err := dec.Decode(&args); err != nil {
			t.Errorf("%s: NodeResourcesFit args %s: %v", name, pc[0].Args.Raw, err)
			continue
		}
		wantArgs := configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated,
			Resources: []configv1.ResourceSpec{{Name: "kube-reclaim.io/reclaimed-cpu", Weight: 1}, {Name: "kube-reclaim.io/reclaimed-memory", Weight: 1}}}}
		if !reflect.DeepEqual(args, wantArgs) {
			t.Errorf("%s: NodeResourcesFit args %+v, want %+v", name, args, wantArgs)
		}
	}
	c, err := decode(test)
	if err != nil {
		t.Fatalf("test configuration: %v\n%s", err, test)
	}
	e := c.Extenders[0]
	if len(c.Profiles) != 2 || ptr.Deref(c.Profiles[1].SchedulerName, "") != SchedulerName || !e.EnableHTTPS ||
		e.TLSConfig == nil || e.TLSConfig.CAFile != "/tmp/ca.crt" || e.ManagedResources[0].Name != "example.com/reclaimed-cpu" {
		t.Errorf("test configuration: profiles %+v, extender %+v", c.Profiles, e)
	}
}
