// Package policyfile loads the policy file and keeps it current, for every
// role that reads it (the publisher for pools, the webhook for profiles), so
// that both apply one reload rule: a valid new version replaces the old one,
// a broken one is rejected loudly and the last good version stays in force.
package policyfile

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// File is a policy file and its last good configuration.
type File struct {
	path     string
	interval time.Duration
	// OnReload, when set, is called from Run after each new version of the
	// file was read: with the configuration now in force and a nil error, or
	// with the rejected version's error (the last good one stays in force).
	// Set it before Run.
	OnReload func(cfg *policy.Config, err error)

	current atomic.Pointer[policy.Config]
	last    []byte
}

// Load reads and validates the file at path, checked for changes every
// interval by Run. No path means the built-in defaults, never reloaded. A
// file that cannot be read or is invalid is an error: a process must not
// start on a policy it was not given.
func Load(path string, interval time.Duration) (*File, error) {
	f := &File{path: path, interval: interval}
	if path == "" {
		f.current.Store(policy.Default())
		return f, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	cfg, warnings, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	logWarnings(path, warnings)
	f.current.Store(cfg)
	f.last = data
	return f, nil
}

// Config returns the configuration in force. Safe for concurrent use.
func (f *File) Config() *policy.Config { return f.current.Load() }

// Path returns the file's path, "" for the built-in defaults.
func (f *File) Path() string { return f.path }

// Run polls the file until ctx ends and swaps in each valid new version.
// Polling, because a ConfigMap volume is updated by swapping a symlink,
// which file watchers easily miss. It returns at once without a file.
func (f *File) Run(ctx context.Context) {
	if f.path == "" || f.interval <= 0 {
		return
	}
	var lastBad []byte
	wait.NonSlidingUntilWithContext(ctx, func(context.Context) {
		data, err := os.ReadFile(f.path)
		if err != nil {
			// A ConfigMap volume is briefly unreadable while its symlink is
			// swapped; not a new version.
			logrus.WithError(err).WithField("file", f.path).Warn("cannot read policy file; keeping the last good policy")
			return
		}
		if bytes.Equal(data, f.last) || bytes.Equal(data, lastBad) {
			return
		}
		cfg, warnings, err := Parse(data)
		if err != nil {
			lastBad = data
			logrus.WithError(err).WithField("file", f.path).Error("rejected new policy file; the last good policy stays in force")
			if f.OnReload != nil {
				f.OnReload(f.current.Load(), err)
			}
			return
		}
		f.last, lastBad = data, nil
		logWarnings(f.path, warnings)
		f.current.Store(cfg)
		logrus.WithFields(logrus.Fields{"file": f.path, "pools": len(cfg.Pools), "profiles": len(cfg.Profiles)}).Info("policy file reloaded")
		if f.OnReload != nil {
			f.OnReload(cfg, nil)
		}
	}, f.interval)
}

// logWarnings logs what a new version of the file should change, once per
// version, so that the log does not repeat it every poll.
func logWarnings(path string, warnings []string) {
	for _, w := range warnings {
		logrus.WithField("file", path).Warn(w)
	}
}
