package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
)

// TestPackWritesAnImageLayoutWhoseDigestsResolve follows the archive the way
// containerd does: index -> manifest -> config and layer, each by digest, and
// checks the layer holds the binary as the entrypoint.
func TestPackWritesAnImageLayoutWhoseDigestsResolve(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	want := []byte("#!not really an ELF, contents only")
	if err := os.WriteFile(bin, want, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	if err := Pack(bin, "/prog", "example.local/prog:v1", out); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, out)
	var idx v1.IndexManifest
	mustJSON(t, files["index.json"], &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[ociimage.AnnotationImageName] != "example.local/prog:v1" {
		t.Fatalf("index manifests = %+v", idx.Manifests)
	}
	blob := func(d v1.Descriptor) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+d.Digest.Hex]
		if !ok {
			t.Fatalf("blob %s missing", d.Digest)
		}
		if h, n, _ := v1.SHA256(bytes.NewReader(b)); h != d.Digest || n != d.Size {
			t.Fatalf("blob %s: digest %s size %d, descriptor says size %d", d.Digest, h, n, d.Size)
		}
		return b
	}
	var man v1.Manifest
	mustJSON(t, blob(idx.Manifests[0]), &man)
	var cfg v1.ConfigFile
	mustJSON(t, blob(man.Config), &cfg)
	if len(man.Layers) != 1 {
		t.Fatalf("layers = %d, want 1", len(man.Layers))
	}
	if cfg.Architecture != HostPlatform.Arch || cfg.OS != "linux" {
		t.Errorf("platform %s/%s, want %s", cfg.OS, cfg.Architecture, HostPlatform)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/prog" {
		t.Errorf("entrypoint = %v", cfg.Config.Entrypoint)
	}
	layer, err := v1Layer(blob(man.Layers[0]))
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(layer)); cfg.RootFS.DiffIDs[0] != h {
		t.Errorf("diff_id %s, uncompressed layer digest %s", cfg.RootFS.DiffIDs[0], h)
	}
	if inLayer := readTarBytes(t, layer); !bytes.Equal(inLayer["prog"], want) {
		t.Errorf("layer holds %v, want the binary at prog", inLayer)
	}
}

// TestImagesImportIntoContainerd imports every test image, and a
// two-platform index like kube-reclaim's, into a throw-away containerd the
// way the real nodes do (`ctr -n k8s.io image import`), and checks each is
// listed under its name with all its host-platform content, unpacked.
func TestImagesImportIntoContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("importing needs a containerd of its own, which needs root; run as root to test the import")
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd not installed (make tools installs it, as root); the import is not tested")
	}
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Skip("ctr not installed (make tools installs it with containerd); the import is not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	imgs, err := Build(ctx, root, filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	// An index whose other platform's image holds a binary of the wrong
	// architecture: only the host's is unpacked, as on a real node.
	var perPlatform []v1.Image
	for _, p := range ociimage.DefaultPlatforms {
		img, err := ociimage.SingleBinary(p, filepath.Join(dir, "images", "pause"), "/usr/local/bin/pause")
		if err != nil {
			t.Fatal(err)
		}
		perPlatform = append(perPlatform, img)
	}
	idx, err := ociimage.Index(perPlatform...)
	if err != nil {
		t.Fatal(err)
	}
	multi := Image{Name: "kube-reclaim.local/multi:v1", Tarball: filepath.Join(dir, "multi.oci.tar")}
	if err := ociimage.WriteTarball(multi.Tarball, multi.Name, idx); err != nil {
		t.Fatal(err)
	}
	imgs = append(imgs, multi)

	sock := startContainerd(t, containerd, ctr, dir)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, ctr, append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, img := range imgs {
		run("images", "import", "--snapshotter", "native", img.Tarball)
	}
	listed := strings.Fields(run("images", "ls", "-q"))
	if len(listed) != len(imgs) {
		t.Errorf("containerd lists %v, want exactly the %d imported names", listed, len(imgs))
	}
	check := run("images", "check", "--snapshotter", "native")
	for _, img := range imgs {
		var line string
		for _, l := range strings.Split(check, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == img.Name {
				line = l
			}
		}
		// REF TYPE DIGEST STATUS SIZE UNPACKED: complete (n/n) ... true
		if !strings.Contains(line, "complete") || !strings.HasSuffix(strings.TrimSpace(line), "true") {
			t.Errorf("%s: ctr images check says %q, want complete and unpacked\n%s", img.Name, line, check)
		}
	}
	d, _ := idx.Digest()
	if !strings.Contains(check, d.String()) {
		t.Errorf("the multi-platform image is not stored under its index digest %s:\n%s", d, check)
	}
	t.Logf("ctr images check:\n%s", check)
}

// startContainerd runs a containerd whose every path is under dir, in a
// mount namespace of its own, and stops it when the test ends.
func startContainerd(t *testing.T, containerd, ctr, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "containerd.sock")
	q := strconv.Quote
	config := `version = 2
root = ` + q(filepath.Join(dir, "root")) + `
state = ` + q(filepath.Join(dir, "state")) + `
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = ` + q(sock) + `
[ttrpc]
  address = ` + q(sock+".ttrpc") + `
[debug]
  address = ` + q(sock+".debug") + `
[plugins."io.containerd.internal.v1.opt"]
  path = ` + q(filepath.Join(dir, "opt")) + `
`
	cfgPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "--", containerd, "--config", cfgPath) //nolint:noctx // stopped by the cleanup below
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("containerd exited: %v\n%s", waitErr, logs.String())
		default:
		}
		if exec.Command(ctr, "-a", sock, "version").Run() == nil { //nolint:noctx // a short probe
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer within 30s\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}

// v1Layer returns a layer blob uncompressed.
func v1Layer(blob []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readTarBytes(t, b)
}

func readTarBytes(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}

// TestSharedObjectsFindsTheInterpreterAndLibcOfACgoBinary builds a binary
// linked against libc and checks the image would carry its loader and libc;
// a static binary (the positive control of "none needed") carries nothing.
func TestSharedObjectsFindsTheInterpreterAndLibcOfACgoBinary(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler: cannot link a binary against libc")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"C\"\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cgo      string
		wantLibc bool
	}{
		{"dynamic (cgo)", "1", true},
		{"static", "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, "prog-"+tc.cgo)
			build := src
			if tc.cgo == "0" {
				build = filepath.Join(dir, "static.go")
				if err := os.WriteFile(build, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("go", "build", "-o", bin, build) //nolint:noctx // a short build
			cmd.Env = append(os.Environ(), "CGO_ENABLED="+tc.cgo, "GOFLAGS=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			got, err := SharedObjects(bin, libDirs())
			if err != nil {
				t.Fatal(err)
			}
			var libc, interp bool
			for _, p := range got {
				libc = libc || filepath.Base(p) == "libc.so.6"
				interp = interp || strings.HasPrefix(filepath.Base(p), "ld-")
			}
			if libc != tc.wantLibc || interp != tc.wantLibc {
				t.Errorf("shared objects %v: libc %v, interpreter %v; want both %v", got, libc, interp, tc.wantLibc)
			}
			out := filepath.Join(dir, "img-"+tc.cgo+".tar")
			if err := PackDynamic(bin, "/usr/local/bin/prog", "example.local/prog:v1", out); err != nil {
				t.Fatal(err)
			}
		})
	}
}
