package cli

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMemoryLimitIsAFractionOfTheContainerLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int64 // the soft limit set; 0: none
		wantErr string
	}{
		{"the extender's limit", map[string]string{MemoryLimitEnv: "184549376"}, 147639500, ""},
		{"no limit given", map[string]string{}, 0, ""},
		{"GOMEMLIMIT wins", map[string]string{MemoryLimitEnv: "184549376", "GOMEMLIMIT": "100MiB"}, 0, ""},
		{"not a number", map[string]string{MemoryLimitEnv: "176Mi"}, 0, `KUBE_RECLAIM_MEMORY_LIMIT="176Mi"`},
		{"zero", map[string]string{MemoryLimitEnv: "0"}, 0, "positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := applyMemoryLimit(func(k string) string { return tc.env[k] })
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("soft limit %d, want %d", got, tc.want)
			}
			want := tc.want
			if want == 0 {
				want = math.MaxInt64
			}
			if in := debug.SetMemoryLimit(-1); in != want {
				t.Errorf("runtime's limit %d, want %d", in, want)
			}
		})
	}
}
