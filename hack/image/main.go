// Command image builds kube-reclaim's container image without a container
// engine (`make image`, `make image-push`): both commands cross-compiled for
// every platform, packed by internal/ociimage into one OCI index, written as
// an OCI layout directory and as a tarball `ctr image import` reads, and
// optionally pushed to a registry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "dev", "version stamped into the binaries and the image's version label")
	flag.StringVar(&o.name, "name", "", "image reference written into the layout and pushed to (default "+ociimage.DefaultRepository+":<version>)")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list, one image each in the index")
	flag.StringVar(&o.layout, "layout", "dist/kube-reclaim.oci", "OCI layout directory to write (empty: none)")
	flag.StringVar(&o.tarball, "tarball", "dist/kube-reclaim.oci.tar", "OCI layout tarball to write, for `ctr -n k8s.io image import` (empty: none)")
	flag.BoolVar(&o.push, "push", false, "push the index to -name with the default keychain's credentials (docker login)")
	flag.StringVar(&o.goCmd, "go", "go", "go command")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type options struct {
	version, name, platforms, layout, tarball, goCmd string
	push                                             bool
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	platforms, err := ociimage.ParsePlatforms(o.platforms)
	if err != nil {
		return err
	}
	if o.version == "" {
		return errors.New("-version is empty")
	}
	if o.name == "" {
		o.name = ociimage.DefaultRepository + ":" + o.version
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "kube-reclaim-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	idx, err := ociimage.KubeReclaim{
		Go: o.goCmd, RepoRoot: root, WorkDir: work, Version: o.version, Platforms: platforms, Created: created,
	}.Build(ctx)
	if err != nil {
		return err
	}
	digest, err := ociimage.Digest(idx)
	if err != nil {
		return err
	}
	if o.layout != "" {
		if err := ociimage.WriteLayout(o.layout, o.name, idx); err != nil {
			return err
		}
		fmt.Println("wrote OCI layout", o.layout)
	}
	if o.tarball != "" {
		if err := os.MkdirAll(filepath.Dir(o.tarball), 0o755); err != nil {
			return err
		}
		if err := ociimage.WriteTarball(o.tarball, o.name, idx); err != nil {
			return err
		}
		fmt.Println("wrote OCI tarball", o.tarball, "(ctr -n k8s.io image import "+o.tarball+")")
	}
	if o.push {
		if err := ociimage.Push(ctx, o.name, idx); err != nil {
			return err
		}
		fmt.Println("pushed", o.name+"@"+digest)
	}
	fmt.Printf("%s index %s (%s) in %s\n", o.name, digest, o.platforms, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// sourceDateEpoch is the image's creation time: SOURCE_DATE_EPOCH when set
// (reproducible-builds.org), otherwise the Unix epoch, never the clock.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", s)
	}
	return time.Unix(sec, 0), nil
}
