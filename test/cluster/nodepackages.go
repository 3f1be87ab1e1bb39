package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CNIBinDir is where Debian's containernetworking-plugins puts the plugins.
const CNIBinDir = "/usr/lib/cni"

// nodePackages are the Debian packages a real node needs and a file each
// one provides, to tell whether it is installed without asking dpkg.
var nodePackages = []struct{ pkg, file string }{
	{"containerd", "containerd"},
	{"runc", "runc"},
	{"containernetworking-plugins", filepath.Join(CNIBinDir, "bridge")},
}

// NodeRuntime are the absolute paths of the container runtime programs.
type NodeRuntime struct {
	Containerd, Ctr, Runc string
	CNIBinDir             string
}

// EnsureNodePackages returns the container runtime a real node uses,
// installing the Debian packages that are missing. It fails with what to
// install when it cannot (not root, no apt-get), so a machine without them
// gets a clear message rather than a kubelet that never turns Ready.
func EnsureNodePackages(ctx context.Context, log io.Writer) (*NodeRuntime, error) {
	if log == nil {
		log = io.Discard
	}
	missing := missingNodePackages()
	if len(missing) > 0 {
		if err := installPackages(ctx, missing, log); err != nil {
			return nil, err
		}
		if still := missingNodePackages(); len(still) > 0 {
			return nil, fmt.Errorf("installed %s but %s still missing", strings.Join(missing, " "), strings.Join(still, " "))
		}
	}
	rt := &NodeRuntime{CNIBinDir: CNIBinDir}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"containerd", &rt.Containerd}, {"ctr", &rt.Ctr}, {"runc", &rt.Runc}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			return nil, fmt.Errorf("real node: %s not found after installing containerd and runc: %w", p.name, err)
		}
		*p.dst = path
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, plugin)); err != nil {
			return nil, fmt.Errorf("real node: CNI plugin %s: %w", plugin, err)
		}
	}
	return rt, nil
}

func missingNodePackages() []string {
	var missing []string
	for _, p := range nodePackages {
		var err error
		if filepath.IsAbs(p.file) {
			_, err = os.Stat(p.file)
		} else {
			_, err = exec.LookPath(p.file)
		}
		if err != nil {
			missing = append(missing, p.pkg)
		}
	}
	return missing
}

func installPackages(ctx context.Context, pkgs []string, log io.Writer) error {
	hint := "apt-get install -y " + strings.Join(pkgs, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("real node: %s missing and installing needs root: run %q as root (kubelet also needs root)", strings.Join(pkgs, ", "), hint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("real node: %s missing and apt-get not found: install them (containerd >= 1.6, runc, CNI plugins in %s) with the system's package manager", strings.Join(pkgs, ", "), CNIBinDir)
	}
	// Test binaries run in parallel; dpkg has its own lock but a second apt-get
	// would fail on it rather than wait.
	cache, err := CacheDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, "apt.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if len(missingNodePackages()) == 0 {
		return nil
	}
	start := time.Now()
	fmt.Fprintf(log, "installing %s with apt-get (needed for a real node)\n", strings.Join(pkgs, " "))
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		// No prompts; and the packages' service scripts must not start a
		// system-wide containerd: every node runs its own.
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "RUNLEVEL=1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 2000))
		}
		return nil
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	err = run(install...)
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		// The package lists may be missing or stale on a fresh machine.
		err = run("update")
		if err == nil {
			err = run(install...)
		}
	}
	if err != nil {
		return fmt.Errorf("real node: installing %s failed (run %q as root): %w", strings.Join(pkgs, " "), hint, err)
	}
	fmt.Fprintf(log, "installed %s in %s\n", strings.Join(pkgs, " "), time.Since(start).Round(time.Second))
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
