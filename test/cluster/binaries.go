package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// CacheEnv relocates the binary cache (default: <repo>/.cache).
const CacheEnv = "KUBE_RECLAIM_CACHE"

// A tool is one wrapper module under hack/tools that pins a component.
type tool struct {
	name   string // directory under hack/tools
	module string // module whose version names the cache entry
	// ldflags are extra linker flags; they are part of the cache key.
	ldflags string
	// tags are build tags; they are part of the cache key.
	tags string
	bins map[string]string // package path -> binary name
	// extra copies files out of the built module's source (for example kwok's
	// CRDs), relative to the module directory, into the cache entry.
	extra []string
	// dir is the module's directory relative to the repository root, when
	// it is not hack/tools/<name>.
	dir string
	// sources are files and directories of this repository, relative to
	// its root, that the binary is built from (for a directory, its Go
	// files, tests aside): their content is part of the cache key, so a
	// change to them rebuilds it, and nothing else does. Tools built from
	// the Go module proxy alone have none, and their keys stay as they were.
	sources []string
}

var tools = []tool{
	{name: "etcd", module: "go.etcd.io/etcd/server/v3",
		bins: map[string]string{"go.etcd.io/etcd/server/v3": "etcd"}},
	{name: "kubernetes", module: "k8s.io/kubernetes", bins: map[string]string{
		"k8s.io/kubernetes/cmd/kube-apiserver":          "kube-apiserver",
		"k8s.io/kubernetes/cmd/kube-controller-manager": "kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler":          "kube-scheduler",
	}},
	{name: "kwok", module: "sigs.k8s.io/kwok",
		bins: map[string]string{"sigs.k8s.io/kwok/cmd/kwok": "kwok"},
		extra: []string{
			"kustomize/crd/bases/kwok.x-k8s.io_resourceusages.yaml",
			"kustomize/crd/bases/kwok.x-k8s.io_clusterresourceusages.yaml",
		}},
	{name: "metrics-server", module: "sigs.k8s.io/metrics-server",
		bins: map[string]string{"sigs.k8s.io/metrics-server/cmd/metrics-server": "metrics-server"}},
}

// firstBuild is how long each tool took to build on a fresh 2-core machine
// with empty Go module and build caches (make demo, module downloads
// included). It only tells people what they are waiting for; a machine with
// warm Go caches builds faster.
var firstBuild = map[string]time.Duration{
	"etcd":           2*time.Minute + 38*time.Second,
	"kubernetes":     8*time.Minute + 24*time.Second,
	"kwok":           2*time.Minute + 39*time.Second,
	"metrics-server": 2*time.Minute + 56*time.Second,
}

// kubeletTool builds kubelet for real nodes from its own wrapper module (the
// same release as the control plane), so adding it rebuilds nothing else.
// Without the version stamp the node reports v0.0.0-master.
var kubeletTool = tool{name: "kubelet", module: "k8s.io/kubernetes",
	bins: map[string]string{"k8s.io/kubernetes/cmd/kubelet": "kubelet"},
	ldflags: "-X k8s.io/component-base/version.gitVersion=v1.34.4" +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34",
}

// kubeProxyTool builds kube-proxy for real nodes in their own network
// namespaces (Services and in-cluster configuration), from a wrapper module
// of its own for the same reason as kubelet's.
var kubeProxyTool = tool{name: "kube-proxy", module: "k8s.io/kubernetes",
	bins:    map[string]string{"k8s.io/kubernetes/cmd/kube-proxy": "kube-proxy"},
	ldflags: kubeletTool.ldflags,
}

// kubectlTool builds the kubectl users run, for the install test's real
// `kubectl apply -k`; a wrapper module of its own for the same reason as
// kubelet's.
var kubectlTool = tool{name: "kubectl", module: "k8s.io/kubernetes",
	bins:    map[string]string{"k8s.io/kubernetes/cmd/kubectl": "kubectl"},
	ldflags: kubeletTool.ldflags,
}

// pluginSchedulerTool builds kube-reclaim-scheduler, kube-scheduler with
// the placement plugin, from the nested module scheduler/ (the same
// Kubernetes release and staging replaces as hack/tools/kubernetes). It is
// keyed by that release and a hash of the plugin's sources: the scheduler
// module and the packages of this module it imports
// (TestPluginSchedulerSourcesCoverItsImports keeps the list whole).
var pluginSchedulerTool = tool{name: "kube-reclaim-scheduler", module: "k8s.io/kubernetes", dir: "scheduler",
	bins:    map[string]string{"github.com/kube-reclaim/kube-reclaim/scheduler/cmd/kube-reclaim-scheduler": "kube-reclaim-scheduler"},
	ldflags: kubeletTool.ldflags,
	sources: []string{"go.mod", "go.sum", "scheduler", "placement", "reclaimable", "enforcement", "internal/leaderlease", "internal/watchhealth", "internal/version"},
}

// Binaries are the absolute paths of the control-plane programs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kwok, MetricsServer string
	// KwokCRDs are the CRD manifests kwok needs for ResourceUsage.
	KwokCRDs []string
}

// RepoRoot returns the kube-reclaim checkout this package was built from.
func RepoRoot() (string, error) {
	if r := os.Getenv("KUBE_RECLAIM_ROOT"); r != "" {
		return r, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository; set KUBE_RECLAIM_ROOT")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "hack", "tools")); err != nil {
		return "", fmt.Errorf("cannot locate hack/tools from %s; set KUBE_RECLAIM_ROOT: %w", root, err)
	}
	return filepath.Clean(root), nil
}

// CacheDir returns where built binaries are kept.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return filepath.Abs(d)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache"), nil
}

// EnsureBinaries returns the cached binaries, building any that are missing.
// Concurrent callers (several test binaries) serialise on a lock file per
// tool, so each is built once. log receives progress lines (may be nil).
func EnsureBinaries(ctx context.Context, log io.Writer) (*Binaries, error) {
	if log == nil {
		log = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(cache, "bin")
	// Say up front what is missing and how long it takes: a first build runs
	// for many minutes without output, which otherwise looks like a hang.
	var missing []tool
	for _, t := range tools {
		key, err := cacheKey(t, filepath.Join(root, "hack", "tools", t.name))
		if err != nil {
			return nil, err
		}
		if !complete(t, filepath.Join(binDir, key)) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintln(log, buildEstimate(missing, binDir))
	}
	dirs := map[string]string{}
	for _, t := range tools {
		d, err := ensureTool(ctx, t, filepath.Join(root, "hack", "tools", t.name), binDir, log)
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", t.name, err)
		}
		dirs[t.name] = d
	}
	b := &Binaries{
		Etcd:              filepath.Join(dirs["etcd"], "etcd"),
		APIServer:         filepath.Join(dirs["kubernetes"], "kube-apiserver"),
		ControllerManager: filepath.Join(dirs["kubernetes"], "kube-controller-manager"),
		Scheduler:         filepath.Join(dirs["kubernetes"], "kube-scheduler"),
		Kwok:              filepath.Join(dirs["kwok"], "kwok"),
		MetricsServer:     filepath.Join(dirs["metrics-server"], "metrics-server"),
	}
	for _, e := range tools[2].extra {
		b.KwokCRDs = append(b.KwokCRDs, filepath.Join(dirs["kwok"], filepath.Base(e)))
	}
	return b, nil
}

// buildEstimate is the line printed before missing tools are built: which
// binaries, and how long that took on a fresh 2-core machine.
func buildEstimate(missing []tool, binDir string) string {
	var bins, took, unmeasured []string
	var total time.Duration
	for _, t := range missing {
		names := make([]string, 0, len(t.bins))
		for _, b := range t.bins {
			names = append(names, b)
		}
		sort.Strings(names)
		bins = append(bins, names...)
		if d, ok := firstBuild[t.name]; ok {
			total += d
			took = append(took, fmt.Sprintf("%s %s", t.name, d))
		} else {
			unmeasured = append(unmeasured, t.name)
		}
	}
	var b strings.Builder
	// Another process may be building them already; ensureTool then waits
	// for its lock, which takes about as long.
	fmt.Fprintf(&b, "control-plane binaries missing from %s, building them (or waiting for a build under way): %s.",
		binDir, strings.Join(bins, ", "))
	if len(took) > 0 {
		fmt.Fprintf(&b, " About %d minutes on 2 cores with empty Go caches (measured: %s)",
			int((total + 30*time.Second).Minutes()), strings.Join(took, ", "))
		if len(unmeasured) > 0 {
			fmt.Fprintf(&b, ", plus %s (not measured)", strings.Join(unmeasured, ", "))
		}
	} else {
		fmt.Fprintf(&b, " Build time of %s not measured yet", strings.Join(unmeasured, ", "))
	}
	b.WriteString("; cached afterwards, keyed by version.")
	return b.String()
}

// EnsureKubelet returns the cached kubelet, building it when missing.
func EnsureKubelet(ctx context.Context, log io.Writer) (string, error) {
	return ensureNodeTool(ctx, kubeletTool, "kubelet", log)
}

// EnsureKubeProxy returns the cached kube-proxy, building it when missing.
func EnsureKubeProxy(ctx context.Context, log io.Writer) (string, error) {
	return ensureNodeTool(ctx, kubeProxyTool, "kube-proxy", log)
}

// EnsureKubectl returns the cached kubectl, building it when missing.
func EnsureKubectl(ctx context.Context, log io.Writer) (string, error) {
	return ensureNodeTool(ctx, kubectlTool, "kubectl", log)
}

// EnsurePluginScheduler returns the cached kube-reclaim-scheduler, building
// it when missing (about 4 minutes on 2 cores with warm Go caches).
func EnsurePluginScheduler(ctx context.Context, log io.Writer) (string, error) {
	return ensureNodeTool(ctx, pluginSchedulerTool, "kube-reclaim-scheduler", log)
}

func ensureNodeTool(ctx context.Context, t tool, bin string, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	d, err := ensureTool(ctx, t, t.modDir(root), filepath.Join(cache, "bin"), log)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", t.name, err)
	}
	return filepath.Join(d, bin), nil
}

// modDir is the directory of t's module in the repository at root.
func (t tool) modDir(root string) string {
	if t.dir != "" {
		return filepath.Join(root, t.dir)
	}
	return filepath.Join(root, "hack", "tools", t.name)
}

// hashSources writes into h the path and content of each of paths, files
// and directories relative to root; a directory stands for the Go files
// under it, tests aside.
func hashSources(h io.Writer, root string, paths []string) error {
	for _, p := range paths {
		start := filepath.Join(root, p)
		err := filepath.WalkDir(start, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if path != start && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			fmt.Fprintf(h, "%s %d\n", rel, len(data))
			_, err = h.Write(data)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cacheKey names a cache entry: the pinned version for people, and a hash of
// the wrapper module and the Go version so any change to either rebuilds
// (and of t's sources, when it has any).
func cacheKey(t tool, modDir string) (string, error) {
	h := sha256.New()
	version := ""
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return "", err
		}
		h.Write(data)
		if f == "go.mod" {
			version = moduleVersion(data, t.module)
		}
	}
	h.Write([]byte(runtime.Version()))
	if t.ldflags != "" { // keeps the keys of tools without extra flags unchanged
		h.Write([]byte(t.ldflags))
	}
	if t.tags != "" {
		h.Write([]byte("tags=" + t.tags))
	}
	if len(t.sources) > 0 {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		if err := hashSources(h, root, t.sources); err != nil {
			return "", err
		}
	}
	if version == "" {
		return "", fmt.Errorf("%s/go.mod does not require %s", modDir, t.module)
	}
	return fmt.Sprintf("%s-%s-%s", t.name, version, hex.EncodeToString(h.Sum(nil))[:10]), nil
}

func moduleVersion(gomod []byte, module string) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	return ""
}

func ensureTool(ctx context.Context, t tool, modDir, binDir string, log io.Writer) (string, error) {
	key, err := cacheKey(t, modDir)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(binDir, key)
	if complete(t, dest) {
		return dest, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(binDir, t.name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(t, dest) { // built by another process while we waited
		return dest, nil
	}
	tmp, err := os.MkdirTemp(binDir, "."+key+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	fmt.Fprintf(log, "building %s into %s (first use of this version; takes minutes)\n", t.name, dest)
	for pkg, name := range t.bins {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags="+t.tags, "-ldflags=-s -w "+t.ldflags, "-o", filepath.Join(tmp, name), pkg)
		cmd.Dir = modDir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out.String())
		}
	}
	if len(t.extra) > 0 {
		cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", t.module)
		cmd.Dir = modDir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("locating %s source: %w", t.module, err)
		}
		src := strings.TrimSpace(string(out))
		for _, e := range t.extra {
			data, err := os.ReadFile(filepath.Join(src, e))
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(tmp, filepath.Base(e)), data, 0o644); err != nil {
				return "", err
			}
		}
	}
	_ = os.RemoveAll(dest) // an incomplete entry left by a killed build
	if err := os.Rename(tmp, dest); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "built %s in %s\n", t.name, time.Since(start).Round(time.Second))
	return dest, nil
}

// complete reports whether every output of t is present in dir. Entries are
// renamed into place only when whole, so presence means complete.
func complete(t tool, dir string) bool {
	for _, name := range t.bins {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			return false
		}
	}
	for _, e := range t.extra {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(e))); err != nil {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive flock, polling so that ctx can cancel the wait.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
