package publisher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
	"github.com/kube-reclaim/kube-reclaim/policy"
)

const (
	selfSelectedPool = "pools: [{name: mine, nodeSelector: {pool: batch}, policy: request}]\n"
	adminPool        = "pools: [{name: batch, nodeSelector: {kube-reclaim.io/pool: batch}, policy: request}]\n"
)

func writePolicy(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: kube-reclaim.io/v1alpha1\nkind: ReclaimPolicy\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAPoolANodeCanJoinItselfIsAStartupErrorUnlessAllowed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		allow   bool
		wantErr bool
	}{
		{"pool keyed on a label kubelets set", selfSelectedPool, false, true},
		{"the same, allowed by flag", selfSelectedPool, true, false},
		{"pool keyed on an administrator's label", adminPool, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.ConfigFile = writePolicy(t, tc.body)
			o.AllowNodeSettablePools = tc.allow
			o.Kubeconfig = servingtest.UnreachableKubeconfig(t)
			o.MetricsAddress = ""
			o.LeaderElection.LeaderElect = false
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			_, err := New(o)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), `nodeSelector key "pool"`) || !strings.Contains(err.Error(), "--allow-node-settable-pool-labels") {
					t.Errorf("New = %v, want an error naming the key and the flag", err)
				}
				return
			}
			if err != nil {
				t.Errorf("New = %v", err)
			}
		})
	}
}

func TestAReloadedPoolANodeCanJoinItselfIsRejected(t *testing.T) {
	for _, allow := range []bool{false, true} {
		o := NewOptions()
		o.AllowNodeSettablePools = allow
		p, _ := newTestPublisherWith(t, t.Context(), o)
		good, _, err := policyfile.Parse([]byte(adminPool))
		if err != nil {
			t.Fatal(err)
		}
		bad, _, err := policyfile.Parse([]byte(selfSelectedPool))
		if err != nil {
			t.Fatal(err)
		}
		p.configReloaded(good, nil)
		if p.config.Load() != good {
			t.Fatalf("allow=%v: an administrator's pool was not put in force", allow)
		}
		p.configReloaded(bad, nil)
		want := good
		if allow {
			want = bad
		}
		if got := p.config.Load(); got != want {
			t.Errorf("allow=%v: in force after reloading a self-selected pool: %v, want %v", allow, poolNames(got), poolNames(want))
		}
	}
}

func poolNames(cfg *policy.Config) []string {
	var out []string
	for _, p := range cfg.Pools {
		out = append(out, p.Name)
	}
	return out
}
