package policy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Profile turns opted-in pods into reclaimed pods (the webhook's pods path):
// their native cpu/memory requests become reclaimed requests.
//
// The webhook is only ever sent pods that carry the opt-in label
// <domain>/reclaimed: "true" or already request reclaimed resources (the
// MutatingWebhookConfiguration's matchConditions), and a profile only
// rewrites the first kind. Its selectors narrow that down further; they
// cannot widen it: a pod without the label never reaches the webhook
// whatever a podSelector says.
type Profile struct {
	Name string
	// NamespaceSelector and PodSelector are the file's selectors, kept for
	// display (kubectl reclaim explain).
	NamespaceSelector metav1.LabelSelector
	PodSelector       metav1.LabelSelector
	// SchedulerName and PriorityClassName, when set, are written into the
	// pod's spec.
	SchedulerName     string
	PriorityClassName string

	namespaces labels.Selector
	pods       labels.Selector
}

// Matches reports whether a pod with podLabels in a namespace with nsLabels
// is selected: both selectors match (an absent or empty selector matches
// everything).
func (p *Profile) Matches(nsLabels, podLabels map[string]string) bool {
	return p.namespaces.Matches(labels.Set(nsLabels)) && p.pods.Matches(labels.Set(podLabels))
}

// Profile returns the first profile in file order that selects the pod, nil
// when none does.
func (c *Config) Profile(nsLabels, podLabels map[string]string) *Profile {
	for i := range c.Profiles {
		if c.Profiles[i].Matches(nsLabels, podLabels) {
			return &c.Profiles[i]
		}
	}
	return nil
}

// NewProfile builds a profile from the policy file's fields. An absent (nil)
// selector matches everything, as an empty one does; a selector
// metav1.LabelSelectorAsSelector refuses is an error, though the policy
// file's validation refuses it first with its field path.
func NewProfile(name string, namespaceSelector, podSelector *metav1.LabelSelector, schedulerName, priorityClassName string) (Profile, error) {
	p := Profile{Name: name, SchedulerName: schedulerName, PriorityClassName: priorityClassName}
	var err error
	if p.NamespaceSelector, p.namespaces, err = selector(namespaceSelector); err != nil {
		return Profile{}, fmt.Errorf("namespaceSelector: %w", err)
	}
	if p.PodSelector, p.pods, err = selector(podSelector); err != nil {
		return Profile{}, fmt.Errorf("podSelector: %w", err)
	}
	return p, nil
}

func selector(ls *metav1.LabelSelector) (metav1.LabelSelector, labels.Selector, error) {
	if ls == nil {
		return metav1.LabelSelector{}, labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	return *ls.DeepCopy(), sel, err
}
