package policyfile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

type reload struct {
	cfg *policy.Config
	err error
}

func write(t *testing.T, path, data string) {
	t.Helper()
	// Replace atomically, like a ConfigMap volume's symlink swap.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, ch <-chan reload) reload {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
		return reload{}
	}
}

func TestReloadKeepsTheLastGoodVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write(t, path, "profiles: [{name: one}]\n")
	f, err := Load(path, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Config().Profiles; len(got) != 1 || got[0].Name != "one" {
		t.Fatalf("initial profiles %+v", got)
	}
	ch := make(chan reload, 10)
	f.OnReload = func(cfg *policy.Config, err error) { ch <- reload{cfg, err} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	write(t, path, "profiles: [{name: one}, {name: two}]\n")
	if r := next(t, ch); r.err != nil || len(r.cfg.Profiles) != 2 || f.Config() != r.cfg {
		t.Fatalf("valid new version: %+v, in force %+v", r, f.Config())
	}
	good := f.Config()

	write(t, path, "profiles: [{name: Bad_Name}]\n")
	r := next(t, ch)
	if r.err == nil || !strings.Contains(r.err.Error(), "profiles[0].name") {
		t.Fatalf("broken version should be rejected with its path, got %v", r.err)
	}
	if r.cfg != good || f.Config() != good {
		t.Errorf("a rejected version must leave the last good configuration in force")
	}

	write(t, path, "profiles: [{name: three}]\n")
	if r := next(t, ch); r.err != nil || f.Config().Profiles[0].Name != "three" {
		t.Fatalf("a fixed version should be taken: %+v", r)
	}
	// The same bytes again are not a new version.
	write(t, path, "profiles: [{name: three}]\n")
	select {
	case r := <-ch:
		t.Errorf("unchanged file reported as a reload: %+v", r)
	case <-time.After(50 * time.Millisecond): // ten polls
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, "default: {cpu: {margin: 3}}\n")
	if _, err := Load(bad, time.Second); err == nil || !strings.Contains(err.Error(), "default.cpu.margin") {
		t.Errorf("an invalid file must not start the process: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), time.Second); err == nil {
		t.Errorf("a missing file must not start the process")
	}
	f, err := Load("", time.Second)
	if err != nil || len(f.Config().Profiles) != 0 || f.Config().Default != policy.DefaultSettings() {
		t.Errorf("no file means the built-in defaults: %+v %v", f.Config(), err)
	}
	// Run without a file returns at once.
	f.Run(context.Background())
}
