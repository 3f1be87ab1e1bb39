package stack

import (
	"strings"
	"testing"
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
