package deploy

import (
	"os"
	"strings"
	"testing"
)

func TestREADMEStatesTheKubernetesFloor(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Kubernetes " + MinKubernetes + " or newer**", "## Clusters older than " + MinKubernetes} {
		if !strings.Contains(string(b), want) {
			t.Errorf("deploy/README.md does not say %q: MinKubernetes and the README disagree", want)
		}
	}
}
