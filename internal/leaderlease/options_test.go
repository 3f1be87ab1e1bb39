package leaderlease

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestElectionOldAndNewFlagNamesSetTheSameField(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		wantNamespace  string
		wantName       string
		wantDeprecated []string
	}{
		{"component-base names", []string{"--leader-elect-resource-namespace=ns1", "--leader-elect-resource-name=lease1"}, "ns1", "lease1", nil},
		{"deprecated names", []string{"--leader-elect-namespace=ns1", "--leader-elect-name=lease1"}, "ns1", "lease1",
			[]string{"--leader-elect-namespace has been deprecated, use --leader-elect-resource-namespace", "--leader-elect-name has been deprecated, use --leader-elect-resource-name"}},
		{"defaults", nil, DefaultNamespace, DefaultName, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := DefaultElection()
			fs := pflag.NewFlagSet("publisher", pflag.ContinueOnError)
			var out bytes.Buffer
			fs.SetOutput(&out)
			e.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if e.ResourceNamespace != tc.wantNamespace || e.ResourceName != tc.wantName {
				t.Errorf("Lease %s/%s, want %s/%s", e.ResourceNamespace, e.ResourceName, tc.wantNamespace, tc.wantName)
			}
			for _, w := range tc.wantDeprecated {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks the warning %q", out.String(), w)
				}
			}
			if len(tc.wantDeprecated) == 0 && strings.Contains(out.String(), "deprecated") {
				t.Errorf("the standard names printed %q", out.String())
			}
			if err := e.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestElectionValidateReportsEveryProblem(t *testing.T) {
	e := DefaultElection()
	e.RenewDeadline = e.LeaseDuration
	e.RetryPeriod.Duration = 0
	e.ResourceLock = "configmaps"
	e.ResourceName = ""
	err := e.Validate()
	if err == nil {
		t.Fatal("Validate accepted four problems")
	}
	for _, want := range []string{"--leader-elect-renew-deadline (15s) must be less", "--leader-elect-retry-period must be positive",
		`--leader-elect-resource-lock "configmaps"`, "--leader-elect-resource-name and --leader-elect-resource-namespace are required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	e.LeaderElect = false
	if err := e.Validate(); err != nil {
		t.Errorf("without --leader-elect: %v", err)
	}
}
