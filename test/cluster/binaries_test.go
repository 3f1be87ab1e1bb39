package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// A tool's sources are in its cache key: a change to a Go file under a
// source directory, or to a file named as a source, rebuilds it; a test
// file or another file in a source directory does not.
func TestSourcesHashFollowsTheFilesABinaryIsBuiltFrom(t *testing.T) {
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
	hash := func() string {
		t.Helper()
		h := sha256.New()
		if err := hashSources(h, dir, []string{"go.mod", "cmd"}); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	write("go.mod", "module example.com/w\n")
	write("cmd/main.go", "package main\n")
	for _, c := range []struct {
		what    string
		change  func()
		rebuild bool
	}{
		{"a test file", func() { write("cmd/main_test.go", "package main\n") }, false},
		{"a README", func() { write("cmd/README.md", "words") }, false},
		{"a Go file elsewhere", func() { write("other/x.go", "package other\n") }, false},
		{"a Go file", func() { write("cmd/main.go", "package main\n\nfunc main() {}\n") }, true},
		{"a new Go file below", func() { write("cmd/sub/x.go", "package sub\n") }, true},
		{"a named file", func() { write("go.mod", "module example.com/w\n\ngo 1.26\n") }, true},
	} {
		before := hash()
		c.change()
		if changed := hash() != before; changed != c.rebuild {
			t.Errorf("after %s: key changed = %v, want %v", c.what, changed, c.rebuild)
		}
	}
}

// The plugin scheduler's cache key hashes its sources: every package of this
// repository the binary imports must be under one of them, or a change to
// it would not rebuild the binary.
func TestPluginSchedulerSourcesCoverItsImports(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/kube-reclaim/kube-reclaim"
	var pkgs []string
	for p := range pluginSchedulerTool.bins {
		pkgs = append(pkgs, p)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	cmd.Dir = pluginSchedulerTool.modDir(root)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ours int
	for _, p := range strings.Fields(string(out)) {
		if p != module && !strings.HasPrefix(p, module+"/") {
			continue
		}
		ours++
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if !slices.ContainsFunc(pluginSchedulerTool.sources, func(s string) bool { return rel == s || strings.HasPrefix(rel, s+"/") }) {
			t.Errorf("kube-reclaim-scheduler imports %s, which no source directory of its cache key covers (%v)", p, pluginSchedulerTool.sources)
		}
	}
	// Positive control: the plugin itself and the placement core are listed.
	if ours < 3 {
		t.Errorf("go list found %d packages of this repository, want the plugin, its command and placement at least:\n%s", ours, out)
	}
}
