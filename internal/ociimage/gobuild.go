package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// GoBuild cross-compiles static binaries for an image.
type GoBuild struct {
	Go       string   // the go command; empty means "go" from PATH
	Dir      string   // directory of the module the packages belong to
	Packages []string // package patterns, as go build takes them
	OutDir   string   // each package's binary goes here, under its name
	Platform Platform
	LDFlags  string
}

// Run builds the binaries: no cgo (nothing in the image to link against),
// no file system paths and no VCS stamp, so the same tree and toolchain give
// the same bytes.
func (b GoBuild) Run(ctx context.Context) error {
	goCmd := b.Go
	if goCmd == "" {
		goCmd = "go"
	}
	if err := os.MkdirAll(b.OutDir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", b.LDFlags, "-o", b.OutDir + string(os.PathSeparator)}
	args = append(args, b.Packages...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = b.Dir
	// GOWORK=off: each module (the nested scheduler/ one too) builds with
	// its own go.mod.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS="+b.Platform.OS, "GOARCH="+b.Platform.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v for %s: %w\n%s", b.Packages, b.Platform, err, out)
	}
	return nil
}
