package stack

import (
	"slices"
	"strings"
	"testing"

	configv1 "k8s.io/kube-scheduler/config/v1"
)

// The stack runs what deploy/ deploys: the arguments, the environment and
// the policy come from the rendered overlay, minus what is specific to a
// machine.
func TestLoadDeployedTakesArgumentsAndPolicyFromTheOverlay(t *testing.T) {
	d, err := LoadDeployed("default")
	if err != nil {
		t.Fatal(err)
	}
	for role, args := range d.Args {
		for _, a := range args {
			for _, f := range machineFlags {
				if strings.HasPrefix(a, f+"=") || a == f {
					t.Errorf("%s keeps machine-specific flag %s", role, a)
				}
			}
		}
	}
	if !contains(d.Args[Publisher], "--leader-elect=true") {
		t.Errorf("publisher args %v lack the deployed --leader-elect=true", d.Args[Publisher])
	}
	if !contains(d.Args[Extender], "--strategy=spread") {
		t.Errorf("extender args %v lack the deployed --strategy", d.Args[Extender])
	}
	for role, gogc := range map[string]string{Publisher: "GOGC=25", Extender: "GOGC=50"} {
		if !contains(d.Env[role], gogc) {
			t.Errorf("%s environment %v lacks the deployed %s", role, d.Env[role], gogc)
		}
	}
	if !strings.Contains(d.Policy, "policy:") {
		t.Errorf("policy file not found in the ConfigMap: %q", d.Policy)
	}
	if d.WebhookConfigName != "kube-reclaim-webhook" {
		t.Errorf("webhook configuration %q", d.WebhookConfigName)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The plugin topology's benchmark schedules on the deployed profile: the
// plugin at every extension point it implements, no extender.
func TestPluginSchedulerProfileIsTheDeployedOne(t *testing.T) {
	p, err := PluginSchedulerProfile()
	if err != nil {
		t.Fatal(err)
	}
	if p.SchedulerName == nil || *p.SchedulerName != "kube-reclaim-scheduler" {
		t.Errorf("profile name %v, want kube-reclaim-scheduler", p.SchedulerName)
	}
	if p.Plugins == nil {
		t.Fatal("the profile enables no plugin")
	}
	for point, set := range map[string]configv1.PluginSet{"preFilter": p.Plugins.PreFilter, "filter": p.Plugins.Filter, "score": p.Plugins.Score, "reserve": p.Plugins.Reserve} {
		if !slices.ContainsFunc(set.Enabled, func(pl configv1.Plugin) bool { return pl.Name == "KubeReclaim" }) {
			t.Errorf("%s does not enable KubeReclaim: %+v", point, set.Enabled)
		}
	}
	if !slices.ContainsFunc(p.PluginConfig, func(a configv1.PluginConfig) bool { return a.Name == "KubeReclaim" && len(a.Args.Raw) > 0 }) {
		t.Errorf("no KubeReclaim args in %+v", p.PluginConfig)
	}
}
