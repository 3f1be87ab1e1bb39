// Package images builds the container images the local real node runs: the
// pod sandbox ("pause") and a workload, each one static Go binary from this
// directory, packed as an OCI image layout tarball that `ctr image import`
// reads. The test cluster never pulls: pod specs name these images with
// imagePullPolicy Never.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
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

// sources maps each image to its program's package, relative to this module.
var sources = []struct{ name, pkg, binary string }{
	{Pause, "./test/images/pause", "pause"},
	{Workload, "./test/images/workload", "workload"},
}

// Build compiles every image's program from the module rooted at repoRoot
// and writes one tarball per image into outDir.
func Build(ctx context.Context, repoRoot, outDir string) ([]Image, error) {
	var out []Image
	for _, s := range sources {
		bin := filepath.Join(outDir, s.binary)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, s.pkg)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", s.pkg, err, b)
		}
		tarball := filepath.Join(outDir, s.binary+".oci.tar")
		if err := Pack(bin, "/"+s.binary, s.name, tarball); err != nil {
			return nil, fmt.Errorf("packing %s: %w", s.name, err)
		}
		out = append(out, Image{Name: s.name, Tarball: tarball})
	}
	return out, nil
}

// OCI media types and the minimal document shapes of the image-spec; the
// module does not otherwise depend on an OCI library.
const (
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint"`
		Env        []string `json:"Env,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Pack writes an OCI image layout archive for an image whose one layer holds
// the file at binary as entrypoint (an absolute path inside the image).
func Pack(binary, entrypoint, name, tarball string) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	// A fixed timestamp keeps the layer, and so the image digest, the same
	// for the same binary.
	epoch := time.Unix(0, 0)
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: entrypoint[1:], Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(data); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}

	var cfg imageConfig
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.Env = []string{"PATH=/"}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digest(layer.Bytes())}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	man, err := json.Marshal(manifest{
		SchemaVersion: 2, MediaType: mediaTypeManifest,
		Config: descriptor{MediaType: mediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		Layers: []descriptor{{MediaType: mediaTypeLayer, Digest: digest(layer.Bytes()), Size: int64(layer.Len())}},
	})
	if err != nil {
		return err
	}
	idx, err := json.Marshal(index{
		SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json",
		Manifests: []descriptor{{
			MediaType: mediaTypeManifest, Digest: digest(man), Size: int64(len(man)),
			Platform: &platform{Architecture: runtime.GOARCH, OS: "linux"},
			// containerd names the imported image after this annotation.
			Annotations: map[string]string{"io.containerd.image.name": name},
		}},
	})
	if err != nil {
		return err
	}

	f, err := os.Create(tarball)
	if err != nil {
		return err
	}
	w := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idx},
		{blobPath(cfgJSON), cfgJSON},
		{blobPath(man), man},
		{blobPath(layer.Bytes()), layer.Bytes()},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := w.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
			f.Close()
			return err
		}
	}
	for _, fl := range files {
		if err := w.WriteHeader(&tar.Header{Name: fl.name, Mode: 0o644, Size: int64(len(fl.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(fl.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(b []byte) string {
	sum := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(sum[:])
}
