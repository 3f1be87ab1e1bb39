package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fakeBinaries writes one fake binary per command per platform into a fresh
// directory, with the given file mode and modification time: neither may
// reach the image.
func fakeBinaries(t *testing.T, mode os.FileMode, mtime time.Time) map[Platform][]File {
	t.Helper()
	dir := t.TempDir()
	out := map[Platform][]File{}
	for _, p := range DefaultPlatforms {
		for _, c := range []string{"kube-reclaim", "kubectl-reclaim"} {
			src := filepath.Join(dir, p.Arch+"-"+c)
			if err := os.WriteFile(src, []byte("fake "+c+" for "+p.String()), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(src, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			out[p] = append(out[p], File{Path: BinDir + "/" + c, Source: src})
		}
	}
	return out
}

func testIndex(t *testing.T, bins map[Platform][]File) v1.ImageIndex {
	t.Helper()
	var imgs []v1.Image
	for _, p := range DefaultPlatforms {
		img, err := Image(p, bins[p], Config{
			Entrypoint: []string{Entrypoint}, Env: []string{"PATH=" + BinDir}, User: NonRoot,
			Labels: map[string]string{"org.opencontainers.image.source": "https://example.com/x"},
		})
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestTwoBuildsOfTheSameBinariesGiveOneDigest(t *testing.T) {
	first := testIndex(t, fakeBinaries(t, 0o600, time.Now()))
	second := testIndex(t, fakeBinaries(t, 0o755, time.Now().Add(-time.Hour)))
	d1, err := first.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := second.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatalf("index digests differ: %s and %s", d1, d2)
	}
	// The archives too, byte for byte, not only what they describe.
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	if err := WriteTarball(a, "example.com/x:v1", first); err != nil {
		t.Fatal(err)
	}
	if err := WriteTarball(b, "example.com/x:v1", second); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two tarballs of one index differ")
	}

	// Positive control: another binary gives another digest.
	bins := fakeBinaries(t, 0o755, time.Now())
	if err := os.WriteFile(bins[DefaultPlatforms[1]][0].Source, []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if d3, _ := testIndex(t, bins).Digest(); d3 == d1 {
		t.Error("a changed binary left the index digest unchanged")
	}
}

func TestIndexHoldsOneImageForEachPlatform(t *testing.T) {
	idx := testIndex(t, fakeBinaries(t, 0o755, time.Now()))
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index media type %s", im.MediaType)
	}
	var got []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("descriptor %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != d.Platform.String() {
			t.Errorf("descriptor says %s, config %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
		got = append(got, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !reflect.DeepEqual(got, want) {
		t.Errorf("platforms %v, want %v", got, want)
	}
}

func TestImageConfigRunsKubeReclaimAsNonRoot(t *testing.T) {
	idx := testIndex(t, fakeBinaries(t, 0o755, time.Now()))
	im, _ := idx.IndexManifest()
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("manifest %s, config %s: want OCI media types", m.MediaType, m.Config.MediaType)
	}
	cf, _ := img.ConfigFile()
	for _, c := range []struct{ what, got, want string }{
		{"user", cf.Config.User, "65532:65532"},
		{"entrypoint", strings.Join(cf.Config.Entrypoint, " "), "/usr/local/bin/kube-reclaim"},
		{"cmd", strings.Join(cf.Config.Cmd, " "), ""},
		{"created", cf.Created.UTC().Format(time.RFC3339), "1970-01-01T00:00:00Z"},
		{"history created", cf.History[0].Created.UTC().Format(time.RFC3339), "1970-01-01T00:00:00Z"},
		{"source label", cf.Config.Labels["org.opencontainers.image.source"], "https://example.com/x"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
}

func TestLayerHoldsRootOwnedBinariesAndTheNonRootUser(t *testing.T) {
	idx := testIndex(t, fakeBinaries(t, 0o600, time.Now()))
	im, _ := idx.IndexManifest()
	img, _ := idx.Image(im.Manifests[1].Digest) // arm64
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v, %v: want one", layers, err)
	}
	mt, _ := layers[0].MediaType()
	if mt != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("layer media type %s", mt)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type got struct {
		typ      byte
		mode     int64
		uid, gid int
		data     string
	}
	entries := map[string]got{}
	var names []string
	r := tar.NewReader(rc)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: mtime %s, want the epoch", h.Name, h.ModTime)
		}
		b, _ := io.ReadAll(r)
		entries[h.Name] = got{h.Typeflag, h.Mode, h.Uid, h.Gid, string(b)}
		names = append(names, h.Name)
	}
	want := map[string]got{
		"etc/":                          {tar.TypeDir, 0o755, 0, 0, ""},
		"etc/group":                     {tar.TypeReg, 0o644, 0, 0, "root:x:0:\nnonroot:x:65532:\n"},
		"etc/passwd":                    {tar.TypeReg, 0o644, 0, 0, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		"home/":                         {tar.TypeDir, 0o755, 0, 0, ""},
		"home/nonroot/":                 {tar.TypeDir, 0o700, 65532, 65532, ""},
		"tmp/":                          {tar.TypeDir, 0o1777, 0, 0, ""},
		"usr/":                          {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/":                    {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/":                {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/kube-reclaim":    {tar.TypeReg, 0o755, 0, 0, "fake kube-reclaim for linux/arm64"},
		"usr/local/bin/kubectl-reclaim": {tar.TypeReg, 0o755, 0, 0, "fake kubectl-reclaim for linux/arm64"},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("layer entries:\n got %+v\nwant %+v", entries, want)
	}
	sorted := append([]string(nil), names...)
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1] >= sorted[i] {
			t.Errorf("entries not sorted: %v", names)
			break
		}
	}
}

func TestWriteTarballResolvesEveryDigestFromTheNamedEntry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		index bool
	}{{"single-platform image", false}, {"multi-platform index", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "prog")
			if err := os.WriteFile(bin, []byte("prog"), 0o755); err != nil {
				t.Fatal(err)
			}
			var img any
			img, err := SingleBinary(Platform{"linux", "amd64"}, bin, "/prog")
			if err != nil {
				t.Fatal(err)
			}
			if tc.index {
				img = testIndex(t, fakeBinaries(t, 0o755, time.Now()))
			}
			out := filepath.Join(dir, "img.tar")
			if err := WriteTarball(out, "example.local/prog:v1", img); err != nil {
				t.Fatal(err)
			}
			files := readTar(t, out)
			var ociLayout struct{ ImageLayoutVersion string }
			if mustJSON(t, files["oci-layout"], &ociLayout); ociLayout.ImageLayoutVersion != "1.0.0" {
				t.Errorf("oci-layout = %q", files["oci-layout"])
			}
			var idx v1.IndexManifest
			mustJSON(t, files["index.json"], &idx)
			if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[AnnotationImageName] != "example.local/prog:v1" {
				t.Fatalf("index.json manifests = %+v", idx.Manifests)
			}
			// Follow every descriptor down to the layers, as containerd does.
			var walk func(d v1.Descriptor) int
			walk = func(d v1.Descriptor) int {
				b, ok := files["blobs/sha256/"+d.Digest.Hex]
				if !ok {
					t.Fatalf("blob %s missing", d.Digest)
				}
				if h, n, _ := v1.SHA256(bytes.NewReader(b)); h != d.Digest || n != d.Size {
					t.Fatalf("blob %s: digest %s size %d, descriptor says size %d", d.Digest, h, n, d.Size)
				}
				switch {
				case d.MediaType.IsIndex():
					var im v1.IndexManifest
					mustJSON(t, b, &im)
					layers := 0
					for _, m := range im.Manifests {
						layers += walk(m)
					}
					return layers
				case d.MediaType.IsImage():
					var m v1.Manifest
					mustJSON(t, b, &m)
					walk(m.Config)
					for _, l := range m.Layers {
						walk(l)
					}
					return len(m.Layers)
				}
				return 0
			}
			want := 1
			if tc.index {
				want = 2
			}
			if got := walk(idx.Manifests[0]); got != want {
				t.Errorf("%d layers reached, want %d", got, want)
			}
			if !tc.index {
				if p := idx.Manifests[0].Platform; p == nil || p.String() != "linux/amd64" {
					t.Errorf("index.json entry platform %v, want linux/amd64", p)
				}
			}
		})
	}
}

func TestSingleBinaryRunsTheBinaryFoundOnPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kube-scheduler")
	if err := os.WriteFile(bin, []byte("scheduler"), 0o700); err != nil {
		t.Fatal(err)
	}
	img, err := SingleBinary(Platform{"linux", "arm64"}, bin, "/usr/local/bin/kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if cf.Architecture != "arm64" || cf.Config.User != "" ||
		!reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/kube-scheduler"}) ||
		!reflect.DeepEqual(cf.Config.Env, []string{"PATH=/usr/local/bin"}) {
		t.Errorf("config %+v (arch %s)", cf.Config, cf.Architecture)
	}
}

func TestBadInputIsRefusedWithAClearError(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "b")
	if err := os.WriteFile(bin, []byte("b"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Platform{"linux", "amd64"}
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"platform without arch", func() error { _, err := ParsePlatforms("linux"); return err }, "want os/arch"},
		{"platform twice", func() error { _, err := ParsePlatforms("linux/amd64,linux/amd64"); return err }, "listed twice"},
		{"relative path", func() error { _, err := Image(p, []File{{Path: "bin/b", Source: bin}}, Config{}); return err }, "clean absolute"},
		{"unclean path", func() error { _, err := Image(p, []File{{Path: "/bin/../b", Source: bin}}, Config{}); return err }, "clean absolute"},
		{"one path twice", func() error {
			_, err := Image(p, []File{{Path: "/b", Source: bin}, {Path: "/b", Source: bin}}, Config{})
			return err
		}, "twice"},
		{"passwd given and generated", func() error {
			_, err := Image(p, []File{{Path: "/etc/passwd", Source: bin}}, Config{User: NonRoot})
			return err
		}, "twice"},
		{"named user", func() error { _, err := Image(p, nil, Config{User: "nobody"}); return err }, "numeric"},
		{"missing binary", func() error { _, err := SingleBinary(p, filepath.Join(dir, "nope"), "/nope"); return err }, "no such file"},
		{"empty index", func() error { _, err := Index(); return err }, "at least one"},
		{"layout over another directory", func() error {
			img, _ := SingleBinary(p, bin, "/b")
			return WriteLayout(dir, "example.com/b:v1", img)
		}, "not an OCI layout"},
		{"bad name", func() error {
			img, _ := SingleBinary(p, bin, "/b")
			return WriteTarball(filepath.Join(dir, "x.tar"), "Not A Name", img)
		}, "image name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestWriteLayoutReplacesAnEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "b")
	if err := os.WriteFile(bin, []byte("b"), 0o755); err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(dir, "layout")
	for _, ref := range []string{"example.com/b:v1", "example.com/b:v2"} {
		img, err := SingleBinary(Platform{"linux", "amd64"}, bin, "/b")
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteLayout(layoutDir, ref, img); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.IndexManifest
	mustJSON(t, b, &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[AnnotationImageName] != "example.com/b:v2" {
		t.Errorf("index.json after a second write: %+v", idx.Manifests)
	}
}

func TestPushUploadsTheIndexUnderItsDigest(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	idx := testIndex(t, fakeBinaries(t, 0o755, time.Now()))
	ref := strings.TrimPrefix(srv.URL, "http://") + "/kube-reclaim:v1"
	if err := Push(context.Background(), ref, idx); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("registry holds %s, pushed %s", d, want)
	}
	// Every platform's image is there too, not only the index.
	im, _ := got.IndexManifest()
	for _, m := range im.Manifests {
		img, err := remote.Image(r.Context().Digest(m.Digest.String()))
		if err != nil {
			t.Fatalf("%s: %v", m.Platform, err)
		}
		if _, err := img.Layers(); err != nil {
			t.Fatalf("%s: %v", m.Platform, err)
		}
	}
}
