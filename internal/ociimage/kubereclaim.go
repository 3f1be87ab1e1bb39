package ociimage

import (
	"context"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The one definition of kube-reclaim's image. Nothing else is in it: no
// shell, no package manager, no CA certificates (every role talks only to
// the API server, whose CA the service account volume brings), only the two
// static binaries and the nonroot user's /etc/passwd entry, home and /tmp.
const (
	BinDir     = "/usr/local/bin"
	Entrypoint = BinDir + "/kube-reclaim"
	// DefaultRepository is the image the manifests in deploy/ name.
	DefaultRepository = "ghcr.io/kube-reclaim/kube-reclaim"
	versionVar        = "github.com/kube-reclaim/kube-reclaim/internal/version.Version"
)

// Commands are the packages whose binaries the image holds, in BinDir.
var Commands = []string{"./cmd/kube-reclaim", "./cmd/kubectl-reclaim"}

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
}

// Build compiles both commands for every platform and returns the index of
// their images.
func (k KubeReclaim) Build(ctx context.Context) (v1.ImageIndex, error) {
	platforms := k.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
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
		var files []File
		for _, c := range Commands {
			files = append(files, File{Path: BinDir + "/" + filepath.Base(c), Source: filepath.Join(out, filepath.Base(c))})
		}
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
