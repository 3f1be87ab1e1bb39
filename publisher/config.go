package publisher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// loadConfig reads the policy file; no file means the built-in defaults.
func loadConfig(path string) (*policy.Config, []byte, error) {
	if path == "" {
		return policy.Default(), nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading policy file: %w", err)
	}
	cfg, err := policy.Load(data)
	if err != nil {
		return nil, data, fmt.Errorf("policy file %s: %w", path, err)
	}
	return cfg, data, nil
}

// watchConfig polls the policy file and swaps in each valid new version. A
// broken file is rejected loudly (log, metric, Event) and the last good
// configuration stays in force. Polling, because a ConfigMap volume is
// updated by swapping a symlink, which file watchers easily miss.
func (p *Publisher) watchConfig(ctx context.Context, last []byte) {
	if p.opts.ConfigFile == "" {
		return
	}
	t := time.NewTicker(p.opts.ConfigReloadInterval)
	defer t.Stop()
	var lastBad []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(p.opts.ConfigFile)
		if err != nil {
			logrus.WithError(err).WithField("file", p.opts.ConfigFile).Warn("cannot read policy file; keeping the last good policy")
			continue
		}
		if bytes.Equal(data, last) || bytes.Equal(data, lastBad) {
			continue
		}
		cfg, err := policy.Load(data)
		if err != nil {
			lastBad = data
			p.m.configReloads.WithLabelValues("error").Inc()
			logrus.WithError(err).WithField("file", p.opts.ConfigFile).Error("rejected new policy file; the last good policy stays in force")
			p.configEvent(corev1.EventTypeWarning, "PolicyRejected", "rejected new policy file, last good policy stays in force: "+err.Error())
			continue
		}
		last, lastBad = data, nil
		p.config.Store(cfg)
		p.m.configReloads.WithLabelValues("success").Inc()
		logrus.WithFields(logrus.Fields{"file": p.opts.ConfigFile, "pools": len(cfg.Pools)}).Info("policy file reloaded")
		p.configEvent(corev1.EventTypeNormal, "PolicyReloaded", fmt.Sprintf("policy file reloaded (%d pools)", len(cfg.Pools)))
	}
}

func (p *Publisher) configEvent(eventType, reason, msg string) {
	if p.recorder == nil || p.opts.ConfigMap == "" {
		return
	}
	ns, name, err := splitNamespaced(p.opts.ConfigMap)
	if err != nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: name}
	p.recorder.Event(ref, eventType, reason, msg)
}
