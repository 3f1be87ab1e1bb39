package publisher

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// configReloaded counts each new version of the policy file and records it
// as an Event on the ConfigMap; internal/policyfile has already logged it
// and, for a valid one, put it in force.
func (p *Publisher) configReloaded(cfg *policy.Config, err error) {
	if err == nil {
		err = p.checkPools(cfg)
	}
	if err != nil {
		p.m.configReloads.WithLabelValues("error").Inc()
		logrus.WithError(err).Error("rejected new policy file; the last good policy stays in force")
		p.configEvent(corev1.EventTypeWarning, "PolicyRejected", "rejected new policy file, last good policy stays in force: "+err.Error())
		return
	}
	p.config.Store(cfg)
	p.m.configReloads.WithLabelValues("success").Inc()
	p.configEvent(corev1.EventTypeNormal, "PolicyReloaded", fmt.Sprintf("policy file reloaded (%d pools)", len(cfg.Pools)))
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

// checkPools refuses a policy whose pools a node can join by labelling
// itself (policy.Config.NodeSettablePoolKeys), unless
// --allow-node-settable-pool-labels; with it, each such key is logged as a
// warning, at start and on every reload, so the warning stays in the logs
// as long as the file does not change.
func (p *Publisher) checkPools(cfg *policy.Config) error {
	return checkPools(cfg, p.opts)
}

func checkPools(cfg *policy.Config, o *Options) error {
	keys := cfg.NodeSettablePoolKeys(o.ResourceDomain)
	if o.AllowNodeSettablePools {
		for _, w := range keys {
			logrus.WithField("warning", w).Warn("policy file: pool selected by a label nodes can set themselves (--allow-node-settable-pool-labels)")
		}
		return nil
	}
	if len(keys) == 0 {
		return nil
	}
	errs := make([]error, 0, len(keys)+1)
	for _, k := range keys {
		errs = append(errs, errors.New(k))
	}
	errs = append(errs, errors.New("refused unless --allow-node-settable-pool-labels"))
	return errors.Join(errs...)
}
