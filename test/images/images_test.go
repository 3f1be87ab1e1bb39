package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
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
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var idx index
	mustJSON(t, files["index.json"], &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["io.containerd.image.name"] != "example.local/prog:v1" {
		t.Fatalf("index manifests = %+v", idx.Manifests)
	}
	blob := func(d descriptor) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
		if !ok {
			t.Fatalf("blob %s missing", d.Digest)
		}
		if digest(b) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: digest %s size %d, descriptor says size %d", d.Digest, digest(b), len(b), d.Size)
		}
		return b
	}
	var man manifest
	mustJSON(t, blob(idx.Manifests[0]), &man)
	var cfg imageConfig
	mustJSON(t, blob(man.Config), &cfg)
	if len(man.Layers) != 1 {
		t.Fatalf("layers = %d, want 1", len(man.Layers))
	}
	layer := blob(man.Layers[0])
	if cfg.RootFS.DiffIDs[0] != digest(layer) {
		t.Errorf("diff_id %s, uncompressed layer digest %s", cfg.RootFS.DiffIDs[0], digest(layer))
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/prog" {
		t.Errorf("entrypoint = %v", cfg.Config.Entrypoint)
	}
	inLayer := readTarBytes(t, layer)
	if !bytes.Equal(inLayer["prog"], want) {
		t.Errorf("layer holds %v, want the binary at prog", inLayer)
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
		if err == io.EOF {
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
