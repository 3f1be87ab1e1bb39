package ociimage

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// AnnotationImageName is the index.json annotation containerd names an
// imported image after (`ctr image import`).
const AnnotationImageName = "io.containerd.image.name"

// WriteLayout writes an OCI image layout directory at dir (replacing what is
// there) whose index.json holds one entry, img (a v1.Image or a
// v1.ImageIndex), annotated with ref: containerd and other OCI tools read the
// name from it.
func WriteLayout(dir, ref string, img any) error {
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	if err := removeLayout(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	annotations := layout.WithAnnotations(map[string]string{
		AnnotationImageName:                 ref,
		"org.opencontainers.image.ref.name": ref,
	})
	switch v := img.(type) {
	case v1.ImageIndex:
		return p.AppendIndex(v, annotations)
	case v1.Image:
		cf, err := v.ConfigFile()
		if err != nil {
			return err
		}
		opts := []layout.Option{annotations}
		if pl := cf.Platform(); pl != nil {
			opts = append(opts, layout.WithPlatform(*pl))
		}
		return p.AppendImage(v, opts...)
	default:
		return fmt.Errorf("cannot write a %T as an image", img)
	}
}

// removeLayout removes dir if it is an earlier OCI layout (or empty), and
// refuses to remove anything else: a mistyped -layout must not empty dist/.
func removeLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not an OCI layout: not replacing it", dir)
	}
	return os.RemoveAll(dir)
}

// WriteTarball writes what WriteLayout would as one tar archive at file, the
// form `ctr -n k8s.io image import` reads. Entries are sorted, with fixed
// times, owners and modes, so the same image gives the same archive.
func WriteTarball(file, ref string, img any) (err error) {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := WriteLayout(filepath.Join(dir, "layout"), ref, img); err != nil {
		return err
	}
	return tarDir(filepath.Join(dir, "layout"), file)
}

func tarDir(dir, file string) (err error) {
	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		} else if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)

	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(file)
		}
	}()
	w := tar.NewWriter(f)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		hdr := &tar.Header{Name: n, ModTime: epoch, Uname: "root", Gname: "root"}
		if n[len(n)-1] == '/' {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
			if err := w.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		if err := addFile(w, hdr, filepath.Join(dir, filepath.FromSlash(n))); err != nil {
			return err
		}
	}
	return w.Close()
}

func addFile(w *tar.Writer, hdr *tar.Header, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, st.Size()
	if err := w.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(w, in)
	return err
}

// Push uploads idx to the registry as ref, with the credentials of the
// default keychain (docker's config.json, as `docker login` writes it).
func Push(ctx context.Context, ref string, idx v1.ImageIndex) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", r, err)
	}
	return nil
}

// Digest is the digest of an image or index, as "sha256:...".
func Digest(img any) (string, error) {
	switch v := img.(type) {
	case v1.ImageIndex:
		d, err := v.Digest()
		return d.String(), err
	case v1.Image:
		d, err := v.Digest()
		return d.String(), err
	default:
		return "", errors.New("not an image")
	}
}
