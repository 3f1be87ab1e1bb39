// Package images builds the container images the local real node runs: the
// pod sandbox ("pause") and a workload, each one static Go binary from this
// directory, packed by internal/ociimage (the library `make image` uses) as
// an OCI image layout tarball that `ctr image import` reads. The test
// cluster never pulls: pod specs name these images with imagePullPolicy
// Never.
package images

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
)

// The image names; the registry part is never contacted.
const (
	Pause    = "kube-reclaim.local/pause:v1"
	Workload = "kube-reclaim.local/workload:v1"
)

// Image is one built image.
type Image struct {
	Name    string // reference, as pod specs use it
	Tarball string // OCI image layout archive
}

// sources maps each image to its program's package, relative to this module;
// each binary is named after its package's directory.
var sources = []struct{ name, pkg string }{
	{Pause, "./test/images/pause"},
	{Workload, "./test/images/workload"},
}

// HostPlatform is the platform of the machine the tests run on, the only
// one its nodes run.
var HostPlatform = ociimage.Platform{OS: "linux", Arch: runtime.GOARCH}

// Build compiles every image's program from the module rooted at repoRoot
// and writes one tarball per image into outDir.
func Build(ctx context.Context, repoRoot, outDir string) ([]Image, error) {
	b := ociimage.GoBuild{Dir: repoRoot, OutDir: outDir, Platform: HostPlatform, LDFlags: "-s -w"}
	for _, s := range sources {
		b.Packages = append(b.Packages, s.pkg)
	}
	if err := b.Run(ctx); err != nil {
		return nil, err
	}
	var out []Image
	for _, s := range sources {
		binary := filepath.Join(outDir, filepath.Base(s.pkg))
		tarball := binary + ".oci.tar"
		if err := Pack(binary, "/"+filepath.Base(s.pkg), s.name, tarball); err != nil {
			return nil, fmt.Errorf("packing %s: %w", s.name, err)
		}
		out = append(out, Image{Name: s.name, Tarball: tarball})
	}
	return out, nil
}

// Pack writes an OCI image layout archive named name for the host platform
// whose one layer holds the static binary at entrypoint (an absolute path
// inside the image), which is what its containers run; PATH is the
// entrypoint's directory. It packs an existing binary under any name, for
// example kube-scheduler under the name the manifests give its image.
func Pack(binary, entrypoint, name, tarball string) error {
	img, err := ociimage.SingleBinary(HostPlatform, binary, entrypoint)
	if err != nil {
		return err
	}
	return ociimage.WriteTarball(tarball, name, img)
}
