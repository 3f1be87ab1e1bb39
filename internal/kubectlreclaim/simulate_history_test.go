package kubectlreclaim

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kube-reclaim/kube-reclaim/internal/replay"
)

// runOffline runs `kubectl reclaim args...` with clients that count being
// asked for: a replay must never need them.
func runOffline(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	asked := 0
	o.NewClients = func() (Clients, error) {
		asked++
		return Clients{}, errors.New("no cluster in this test")
	}
	cmd := NewCommand(o)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), asked, err
}

const historyFile = "../replay/testdata/violation.csv"

func TestSimulateHistoryReplaysTheFileWithoutACluster(t *testing.T) {
	// Positive control: simulate without --history asks for clients.
	if _, asked, err := runOffline(t, "simulate"); err == nil || asked == 0 {
		t.Fatalf("simulate without --history: asked for clients %d times, err %v; want it to ask and fail", asked, err)
	}
	policyFile := filepath.Join(t.TempDir(), "tight.yaml")
	if err := os.WriteFile(policyFile, []byte("default:\n  cpu: {margin: 0.5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"table", []string{"--history", historyFile, "--node-cpu", "10", "--node-memory", "10Gi"}, func(t *testing.T, out string) {
			for _, want := range []string{"1 pods on 1 nodes of 10 cores/10 GiB, as the file names them", "default ", "koordinator (baseline)", "requests-minus-peak (baseline)"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		}},
		{"json with compare", []string{"--history", historyFile, "--node-cpu", "10", "--node-memory", "10Gi", "--compare", policyFile, "-o", "json"}, func(t *testing.T, out string) {
			var rep replay.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			var names []string
			for _, r := range rep.Results {
				names = append(names, r.Name)
			}
			if want := "default," + policyFile + ",koordinator,requests-minus-peak"; strings.Join(names, ",") != want {
				t.Errorf("policies %v, want %s", names, want)
			}
			if rep.Results[0].Cluster.NodeIntervals != 5 {
				t.Errorf("node-intervals %d, want 5 (6 steps, one node)", rep.Results[0].Cluster.NodeIntervals)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, asked, err := runOffline(t, append([]string{"simulate"}, tc.args...)...)
			if err != nil || asked != 0 {
				t.Fatalf("err %v, asked for clients %d times; want a replay that never asks", err, asked)
			}
			tc.check(t, out)
		})
	}
}

func TestSimulateHistoryRejectsFlagsItCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"from cluster", []string{"--from-cluster"}, "--history reads no cluster"},
		{"node name", []string{"node-1"}, "no node name or --selector"},
		{"yaml", []string{"-o", "yaml"}, `not "yaml"`},
		{"node cpu", []string{"--node-cpu", "lots"}, "--node-cpu: want a positive quantity"},
		{"decrease threshold", []string{"--decrease-threshold", "1"}, "--decrease-threshold must be in [0,1)"},
		{"jobs shorter than a step", []string{"--batch-lifetime", "1m"}, "--batch-lifetime 1m0s is shorter than --step 5m0s"},
		{"malformed file", []string{"--history", "../replay/testdata/malformed.csv"}, "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "--history", historyFile}, tc.args...)
			_, asked, err := runOffline(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || asked != 0 {
				t.Errorf("err %v (asked %d), want one containing %q and no clients", err, asked, tc.want)
			}
		})
	}
}
