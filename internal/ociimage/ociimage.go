// Package ociimage builds OCI images from static binaries, with no container
// engine and no base image: every image is one layer written here, packed
// with github.com/google/go-containerregistry. That library is a plain Go
// call from our own build tool, so building needs neither a daemon nor an
// extra binary (ko would add a second build tool around the same library).
//
// Images are reproducible: fixed timestamps, sorted tar entries and fixed
// owners and modes, so the same binaries always give the same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platform is an operating system and CPU architecture, as in "linux/amd64".
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms reads a comma-separated list of os/arch pairs.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	seen := map[Platform]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		osName, arch, ok := strings.Cut(f, "/")
		if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch, for example linux/amd64", f)
		}
		p := Platform{OS: osName, Arch: arch}
		if seen[p] {
			return nil, fmt.Errorf("platform %s listed twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// File is one regular file of an image's layer.
type File struct {
	Path   string // absolute path inside the image
	Source string // file on this machine whose contents it gets
	// Mode is the file's permission bits; 0 means 0755 (binaries).
	Mode int64
}

// Config is what a container of the image runs, and its metadata.
type Config struct {
	Entrypoint []string
	Env        []string
	// User is "uid:gid" or empty for root. A numeric non-root user also gets
	// an /etc/passwd and /etc/group entry named "nonroot", a home directory
	// it owns and a /tmp, the way distroless images have them: programs that
	// look up their user or write a temporary file work.
	User   string
	Labels map[string]string
	// Created stamps the config and history; the zero value means the Unix
	// epoch, so that builds do not depend on the clock.
	Created time.Time
}

// NonRoot is the user images run as, the one distroless calls nonroot.
const NonRoot = "65532:65532"

// Image builds a one-layer image for platform p holding files, and the
// directories above them. Files and directories are owned by root, so the
// non-root user a container runs as cannot change its own binaries.
func Image(p Platform, files []File, cfg Config) (v1.Image, error) {
	created := cfg.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	layerTar, err := layer(files, cfg.User, created)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   l,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "kube-reclaim ociimage", Comment: "static binaries"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint: cfg.Entrypoint,
		Env:        cfg.Env,
		User:       cfg.User,
		Labels:     cfg.Labels,
	}
	return mutate.ConfigFile(img, cf)
}

// SingleBinary builds the image of one static binary placed at entrypoint
// (an absolute path), which is also what it runs; PATH is the binary's
// directory, so that a pod's command may name it without the path.
func SingleBinary(p Platform, binary, entrypoint string) (v1.Image, error) {
	return Image(p, []File{{Path: entrypoint, Source: binary}}, Config{
		Entrypoint: []string{entrypoint},
		Env:        []string{"PATH=" + path.Dir(entrypoint)},
	})
}

// Index puts images, one per platform, into one OCI image index.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	if len(imgs) == 0 {
		return nil, errors.New("an index needs at least one image")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil {
			return nil, errors.New("an image of the index names no platform")
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("two images for %s", p)
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// entry is one tar entry of a layer.
type entry struct {
	hdr  tar.Header
	data []byte
}

// layer writes the uncompressed tar of files plus the parent directories
// they need, sorted by name, every header's times, owner and mode fixed.
func layer(files []File, user string, created time.Time) ([]byte, error) {
	entries := tree{}
	if err := entries.addFiles(files); err != nil {
		return nil, err
	}
	if err := entries.addUser(user); err != nil {
		return nil, err
	}
	return entries.writeTar(created)
}

// tree is a layer's entries by name; a directory's name ends in "/".
type tree map[string]entry

func (t tree) addDir(name string, mode int64, uid, gid int) {
	t[name+"/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid}}
}

// addParents adds the directories above name that are not there yet, owned
// by root.
func (t tree) addParents(name string) {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := t[d+"/"]; !ok {
			t.addDir(d, 0o755, 0, 0)
		}
	}
}

func (t tree) addFile(name string, mode int64, data []byte) error {
	if _, ok := t[name]; ok {
		return fmt.Errorf("%s twice in one image", "/"+name)
	}
	t[name] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
	t.addParents(name)
	return nil
}

// addFiles reads each file from its source into the tree.
func (t tree) addFiles(files []File) error {
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("image path %q: want a clean absolute file path", f.Path)
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := t.addFile(f.Path[1:], mode, data); err != nil {
			return err
		}
	}
	return nil
}

// addUser gives a non-root user ("uid" or "uid:gid") the passwd and group
// entries, home and /tmp it needs; root and no user need none.
func (t tree) addUser(user string) error {
	if user == "" {
		return nil
	}
	uid, gid, err := parseUser(user)
	if err != nil || uid == 0 {
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid)
	if err := t.addFile("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return err
	}
	if err := t.addFile("etc/group", 0o644, []byte(group)); err != nil {
		return err
	}
	t.addDir("home", 0o755, 0, 0)
	t.addDir("home/nonroot", 0o700, uid, gid)
	t.addDir("tmp", 0o1777, 0, 0)
	return nil
}

// writeTar writes the entries sorted by name, with the image's creation time
// and the owner's name fixed on every header.
func (t tree) writeTar(created time.Time) ([]byte, error) {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, n := range names {
		e := t[n]
		e.hdr.ModTime = created
		e.hdr.Uname, e.hdr.Gname = "root", "root"
		if e.hdr.Uid != 0 {
			e.hdr.Uname, e.hdr.Gname = "nonroot", "nonroot"
		}
		if err := w.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func parseUser(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		g = u
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", s)
	}
	return uid, gid, nil
}
