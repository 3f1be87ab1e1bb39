package images

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
)

// For tests only: the cached kube-scheduler and metrics-server are built
// with cgo against this machine's libc, and rebuilding them static would
// change every cache key. Their images carry the ELF interpreter and the
// shared libraries they load, copied from this machine at the same paths.
// Release images (make image) hold static binaries only.

// libDirs are where the dynamic loader looks for libraries on a machine
// without an ld.so.cache, which is what the image is.
func libDirs() []string {
	triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	dirs := []string{"/lib", "/usr/lib", "/lib64", "/usr/lib64"}
	if triple != "" {
		dirs = append([]string{"/lib/" + triple, "/usr/lib/" + triple}, dirs...)
	}
	return dirs
}

// PackDynamic is Pack for a dynamically linked binary: the image also holds
// its interpreter and every shared library it needs, directly or through
// another library, at the paths they have on this machine.
func PackDynamic(binary, entrypoint, name, tarball string) error {
	files, err := DynamicFiles(binary, entrypoint)
	if err != nil {
		return err
	}
	img, err := ociimage.Image(HostPlatform, files, ociimage.Config{
		Entrypoint: []string{entrypoint},
		Env:        []string{"PATH=" + path.Dir(entrypoint)},
	})
	if err != nil {
		return err
	}
	return ociimage.WriteTarball(tarball, name, img)
}

// DynamicFiles are the files of an image that runs binary as entrypoint:
// the binary, its interpreter and every shared library it needs, at the
// paths they have on this machine.
func DynamicFiles(binary, entrypoint string) ([]ociimage.File, error) {
	deps, err := SharedObjects(binary, libDirs())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	files := []ociimage.File{{Path: entrypoint, Source: binary}}
	for _, d := range deps {
		files = append(files, ociimage.File{Path: d, Source: d})
	}
	return files, nil
}

// SharedObjects returns the absolute paths of binary's ELF interpreter and
// of the shared libraries it loads (DT_NEEDED, followed through each
// library), each found in the first of dirs that has it, sorted. A static
// binary has none.
func SharedObjects(binary string, dirs []string) ([]string, error) {
	found := map[string]bool{}
	var walk func(file string) error
	walk = func(file string) error {
		f, err := elf.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if p := f.Progs; p != nil {
			for _, prog := range p {
				if prog.Type != elf.PT_INTERP {
					continue
				}
				b := make([]byte, prog.Filesz)
				if _, err := prog.ReadAt(b, 0); err != nil {
					return fmt.Errorf("reading the interpreter of %s: %w", file, err)
				}
				interp := string(b[:len(b)-1]) // NUL-terminated
				if !found[interp] {
					found[interp] = true
					if err := walk(interp); err != nil {
						return err
					}
				}
			}
		}
		needed, err := f.DynString(elf.DT_NEEDED)
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return fmt.Errorf("reading DT_NEEDED of %s: %w", file, err)
		}
		for _, lib := range needed {
			p, err := findLib(lib, dirs)
			if err != nil {
				return fmt.Errorf("%s needs %s: %w", file, lib, err)
			}
			if !found[p] {
				found[p] = true
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(binary); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(found))
	for p := range found {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

func findLib(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", dirs)
}
