package version

import (
	"os"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

func TestDeprecationsAreRemovedInTheNextMinorRelease(t *testing.T) {
	b, err := os.ReadFile("../../deploy/components/version/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 {
		t.Fatalf("deploy/components/version names %d images, want 1", len(k.Images))
	}
	installed, err := utilversion.ParseSemantic(k.Images[0].NewTag)
	if err != nil {
		t.Fatal(err)
	}
	removedIn, err := utilversion.ParseSemantic(DeprecatedRemovedIn)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../apis/policy/v1alpha1/testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(example), "until "+DeprecatedRemovedIn+" removes that form") {
		t.Errorf("the policy file example does not name %s as the release that removes the unversioned form", DeprecatedRemovedIn)
	}
	if removedIn.Major() != installed.Major() || removedIn.Minor() != installed.Minor()+1 || removedIn.Patch() != 0 {
		t.Errorf("DeprecatedRemovedIn = %s, want the minor release after %s, the one deploy/ installs", removedIn, installed)
	}
}
