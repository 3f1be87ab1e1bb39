package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The one definition of kube-reclaim's image. Nothing else is in it: no
// shell, no package manager, no CA certificates (every role talks only to
// the API server, whose CA the service account volume brings), only the
// static binaries (kube-reclaim, kubectl-reclaim and kube-reclaim-scheduler)
// and the nonroot user's /etc/passwd entry, home and /tmp.
const (
	BinDir     = "/usr/local/bin"
	Entrypoint = BinDir + "/kube-reclaim"
	// DefaultRepository is the image the manifests in deploy/ name.
	DefaultRepository = "ghcr.io/kube-reclaim/kube-reclaim"
	versionVar        = "github.com/kube-reclaim/kube-reclaim/internal/version.Version"
)

// Commands are the packages whose binaries the image holds, in BinDir.
var Commands = []string{"./cmd/kube-reclaim", "./cmd/kubectl-reclaim"}

// PluginScheduler is kube-reclaim-scheduler's command in the nested module
// SchedulerModule (relative to the repository root): kube-scheduler with
// the placement plugin, for deploy/plugin-scheduler.
const (
	SchedulerModule = "scheduler"
	PluginScheduler = "./cmd/kube-reclaim-scheduler"
)

// DefaultPlatforms are the platforms a release image covers.
var DefaultPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// KubeReclaim says how to build kube-reclaim's image.
type KubeReclaim struct {
	Go        string // the go command; empty means "go"
	RepoRoot  string // the module's root directory
	WorkDir   string // where the binaries are built, one directory per platform
	Version   string // stamped into the binaries and the version label
	Platforms []Platform
	Created   time.Time // see Config.Created
	// NoPluginScheduler leaves kube-reclaim-scheduler out: compiling
	// kube-scheduler takes minutes, which a test image that never runs
	// it need not spend.
	NoPluginScheduler bool
	// PluginSchedulerFiles, when set, are a kube-reclaim-scheduler already
	// built for the one platform of Platforms: the binary, with Path
	// BinDir/kube-reclaim-scheduler, and what it loads if it is not
	// static. Build puts them in the image instead of compiling
	// kube-scheduler once more (the install test reuses the binary
	// test/cluster caches).
	PluginSchedulerFiles []File
}

// Build compiles both commands for every platform and returns the index of
// their images.
func (k KubeReclaim) Build(ctx context.Context) (v1.ImageIndex, error) {
	platforms := k.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
	}
	if len(k.PluginSchedulerFiles) > 0 && (k.NoPluginScheduler || len(platforms) != 1) {
		return nil, fmt.Errorf("prebuilt kube-reclaim-scheduler files are for exactly one platform of an image that has the binary, not %d platforms (NoPluginScheduler %t)", len(platforms), k.NoPluginScheduler)
	}
	var imgs []v1.Image
	for _, p := range platforms {
		out := filepath.Join(k.WorkDir, p.OS+"_"+p.Arch)
		b := GoBuild{
			Go: k.Go, Dir: k.RepoRoot, Packages: Commands, OutDir: out, Platform: p,
			LDFlags: "-s -w -X " + versionVar + "=" + k.Version,
		}
		if err := b.Run(ctx); err != nil {
			return nil, err
		}
		cmds := Commands
		if !k.NoPluginScheduler && len(k.PluginSchedulerFiles) == 0 {
			if err := k.buildPluginScheduler(ctx, out, p); err != nil {
				return nil, err
			}
			cmds = append(slices.Clip(cmds), PluginScheduler)
		}
		var files []File
		for _, c := range cmds {
			files = append(files, File{Path: BinDir + "/" + filepath.Base(c), Source: filepath.Join(out, filepath.Base(c))})
		}
		files = append(files, k.PluginSchedulerFiles...)
		img, err := Image(p, files, Config{
			Entrypoint: []string{Entrypoint},
			Env:        []string{"PATH=" + BinDir},
			User:       NonRoot,
			Created:    k.Created,
			Labels: map[string]string{
				"org.opencontainers.image.source":      "https://github.com/kube-reclaim/kube-reclaim",
				"org.opencontainers.image.description": "kube-reclaim: publish idle requested CPU and memory as extended resources and schedule batch pods onto it",
				"org.opencontainers.image.version":     k.Version,
			},
		})
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
	}
	return Index(imgs...)
}

// buildPluginScheduler builds kube-reclaim-scheduler into out, stamped with
// the Kubernetes release its module requires (as kube-scheduler reports its
// own): the skew rule compares that release with the cluster's.
func (k KubeReclaim) buildPluginScheduler(ctx context.Context, out string, p Platform) error {
	goCmd := k.Go
	if goCmd == "" {
		goCmd = "go"
	}
	dir := filepath.Join(k.RepoRoot, SchedulerModule)
	cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	v, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("the Kubernetes release of %s: %w", dir, err)
	}
	release := strings.TrimSpace(string(v))
	major, minor, ok := strings.Cut(strings.TrimPrefix(release, "v"), ".")
	if !ok {
		return fmt.Errorf("%s requires k8s.io/kubernetes %q, not a release", dir, release)
	}
	minor, _, _ = strings.Cut(minor, ".")
	const cb = "k8s.io/component-base/version."
	return GoBuild{Go: k.Go, Dir: dir, Packages: []string{PluginScheduler}, OutDir: out, Platform: p,
		LDFlags: "-s -w -X " + cb + "gitVersion=" + release + " -X " + cb + "gitMajor=" + major + " -X " + cb + "gitMinor=" + minor,
	}.Run(ctx)
}
