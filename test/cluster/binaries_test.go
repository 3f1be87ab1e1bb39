package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func toolsNamed(t *testing.T, names ...string) []tool {
	t.Helper()
	var out []tool
	for _, n := range names {
		found := false
		for _, tl := range tools {
			if tl.name == n {
				out = append(out, tl)
				found = true
			}
		}
		if !found {
			t.Fatalf("no tool %q", n)
		}
	}
	return out
}

func TestBuildEstimateNamesTheMissingBinariesAndTheirMeasuredTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing []tool
		want    []string
		notWant []string
	}{{
		name:    "empty cache: every binary, the sum of the measured builds",
		missing: toolsNamed(t, "etcd", "kubernetes", "kwok", "metrics-server"),
		want: []string{"/cache/bin", "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, metrics-server.",
			"About 17 minutes on 2 cores with empty Go caches",
			"etcd 2m38s, kubernetes 8m24s, kwok 2m39s, metrics-server 2m56s", "cached afterwards"},
		notWant: []string{"not measured"},
	}, {
		name:    "only kwok missing: its own time, not the whole build",
		missing: toolsNamed(t, "kwok"),
		want:    []string{"under way): kwok.", "About 3 minutes", "(measured: kwok 2m39s)"},
		notWant: []string{"kube-apiserver", "17 minutes"},
	}, {
		name: "a tool without a measurement is named as such",
		missing: append(toolsNamed(t, "etcd"), tool{name: "kubelet", bins: map[string]string{
			"k8s.io/kubernetes/cmd/kubelet": "kubelet"}}),
		want: []string{"under way): etcd, kubelet.", "About 3 minutes", "plus kubelet (not measured)"},
	}, {
		name:    "nothing measured at all",
		missing: []tool{{name: "kubelet", bins: map[string]string{"k8s.io/kubernetes/cmd/kubelet": "kubelet"}}},
		want:    []string{"Build time of kubelet not measured yet"},
		notWant: []string{"About"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildEstimate(tc.missing, "/cache/bin")
			t.Log(got)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in\n%s", w, got)
				}
			}
		})
	}
}

// Every pinned tool has a measured first-build time, so the estimate printed
// before a build covers everything that will be built.
func TestEveryToolHasAMeasuredFirstBuild(t *testing.T) {
	for _, tl := range tools {
		if firstBuild[tl.name] <= 0 {
			t.Errorf("tool %s has no first-build time in firstBuild", tl.name)
		}
	}
}

// A tool whose mains live in its wrapper module is rebuilt when they
// change; the key of a tool without them depends on go.mod and go.sum only.
func TestCacheKeyFollowsTheWrapperSourcesOnlyWhenAsked(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/w\n\nrequire example.com/m v1.2.3\n")
	write("go.sum", "")
	write("cmd/main.go", "package main\n")
	key := func(tl tool) string {
		t.Helper()
		k, err := cacheKey(tl, dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	plain := tool{name: "w", module: "example.com/m"}
	withSources := tool{name: "w", module: "example.com/m", sources: true}
	plainBefore, sourcesBefore := key(plain), key(withSources)
	if !strings.HasPrefix(sourcesBefore, "w-v1.2.3-") || plainBefore == sourcesBefore {
		t.Fatalf("keys %s and %s", plainBefore, sourcesBefore)
	}
	write("cmd/main.go", "package main\n\nfunc main() {}\n")
	if got := key(plain); got != plainBefore {
		t.Errorf("key without sources changed with a .go file: %s -> %s", plainBefore, got)
	}
	if got := key(withSources); got == sourcesBefore {
		t.Errorf("key with sources did not change with a .go file: %s", got)
	}
}
