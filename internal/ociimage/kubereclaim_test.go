package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestKubeReclaimImageBuildsTwiceToOneDigest builds the real image twice,
// each time in its own work directory, and compares the digests. Even with
// a warm Go build cache each build links four binaries, and a cold cache
// compiles every dependency for arm64 first: more than unit tests may take,
// so it runs only when asked (KUBE_RECLAIM_TEST_IMAGE=1).
func TestKubeReclaimImageBuildsTwiceToOneDigest(t *testing.T) {
	if os.Getenv("KUBE_RECLAIM_TEST_IMAGE") != "1" {
		t.Skip("builds kube-reclaim for two platforms twice (minutes); set KUBE_RECLAIM_TEST_IMAGE=1 to run it")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "kube-reclaim")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var digests []string
	for i := 0; i < 2; i++ {
		start := time.Now()
		idx, err := KubeReclaim{RepoRoot: root, WorkDir: t.TempDir(), Version: "v0.0.0-test"}.Build(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(idx)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 {
			t.Fatalf("index holds %d images, want 2 (amd64, arm64)", len(im.Manifests))
		}
		if i == 0 {
			checkBinariesMatchTheirPlatform(t, idx)
		}
		t.Logf("build %d: %s in %s", i+1, d, time.Since(start).Round(time.Second))
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of one tree: %s and %s", digests[0], digests[1])
	}
}

// checkBinariesMatchTheirPlatform reads both binaries out of each platform's
// layer: static ELF executables of that platform's machine, mode 0755.
func checkBinariesMatchTheirPlatform(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	im, _ := idx.IndexManifest()
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := img.Layers()
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		r := tar.NewReader(rc)
		for {
			h, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != "usr/local/bin/kube-reclaim" && h.Name != "usr/local/bin/kubectl-reclaim" {
				continue
			}
			found++
			b, _ := io.ReadAll(r)
			f, err := elf.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s %s: %v", d.Platform, h.Name, err)
			}
			if f.Machine != machine[d.Platform.Architecture] || h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("%s %s: machine %s mode %o uid %d", d.Platform, h.Name, f.Machine, h.Mode, h.Uid)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s %s: dynamically linked", d.Platform, h.Name)
				}
			}
		}
		rc.Close()
		if found != 2 {
			t.Errorf("%s: %d of the two binaries in the layer", d.Platform, found)
		}
	}
}

// TestPrebuiltPluginSchedulerIsForOnePlatformOfAnImageThatHasIt: files of a
// kube-reclaim-scheduler built for one platform cannot go into a
// multi-platform image, nor into one that leaves the binary out; the error
// comes before anything is compiled.
func TestPrebuiltPluginSchedulerIsForOnePlatformOfAnImageThatHasIt(t *testing.T) {
	files := []File{{Path: BinDir + "/kube-reclaim-scheduler", Source: "/nonexistent/kube-reclaim-scheduler"}}
	for _, tc := range []struct {
		name string
		k    KubeReclaim
	}{
		{"the default platforms", KubeReclaim{PluginSchedulerFiles: files}},
		{"two platforms", KubeReclaim{PluginSchedulerFiles: files, Platforms: DefaultPlatforms}},
		{"the binary left out", KubeReclaim{PluginSchedulerFiles: files, Platforms: DefaultPlatforms[:1], NoPluginScheduler: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No Go command: reaching a build would fail differently.
			tc.k.Go = "/nonexistent/go"
			_, err := tc.k.Build(context.Background())
			if err == nil || !strings.Contains(err.Error(), "prebuilt kube-reclaim-scheduler") {
				t.Errorf("Build: %v, want the prebuilt files refused", err)
			}
		})
	}
}
