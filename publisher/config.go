package publisher

import (
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// configReloaded counts each new version of the policy file and records it
// as an Event on the ConfigMap; internal/policyfile has already logged it
// and, for a valid one, put it in force.
func (p *Publisher) configReloaded(cfg *policy.Config, err error) {
	if err != nil {
		p.m.configReloads.WithLabelValues("error").Inc()
		p.configEvent(corev1.EventTypeWarning, "PolicyRejected", "rejected new policy file, last good policy stays in force: "+err.Error())
		return
	}
	p.config.Store(cfg)
	logPolicyWarnings(cfg)
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

// logPolicyWarnings logs what the policy in force allows but should not (see
// policy.Config.Warnings): a pool that nodes can join by labelling
// themselves. Logged at start and on every reload, so the warning stays in
// the logs as long as the file does not change.
func logPolicyWarnings(cfg *policy.Config) {
	for _, w := range cfg.Warnings() {
		logrus.WithField("warning", w).Warn("policy file: pool selected by a label nodes can set themselves")
	}
}
