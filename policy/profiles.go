package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

var profileKeys = []string{"name", "namespaceSelector", "podSelector", "schedulerName", "priorityClassName"}

// profiles parses and validates the "profiles" list.
func (v *validator) profiles(x any) []Profile {
	list, ok := x.([]any)
	if !ok {
		v.add("profiles", "must be a list, got %s", describe(x))
		return nil
	}
	out := make([]Profile, 0, len(list))
	seen := map[string]int{}
	for i, item := range list {
		path := fmt.Sprintf("profiles[%d]", i)
		m := v.mapping(path, item)
		if m == nil {
			continue
		}
		v.unknown(path, m, profileKeys...)
		var p Profile
		name, isString := v.str(path+".name", m, "name")
		p.Name = name
		switch {
		case !isString && m["name"] != nil:
			// wrong type, already reported
		case p.Name == "":
			v.add(path+".name", "must not be empty")
		case seen[p.Name] > 0:
			v.add(path+".name", "duplicate profile name %q (also profiles[%d])", p.Name, seen[p.Name]-1)
		default:
			seen[p.Name] = i + 1
			// The name goes into a pod annotation and kubectl columns.
			v.dns(path+".name", p.Name, validation.IsDNS1123Label)
		}
		p.NamespaceSelector, p.namespaces = v.labelSelector(path+".namespaceSelector", m["namespaceSelector"])
		p.PodSelector, p.pods = v.labelSelector(path+".podSelector", m["podSelector"])
		if s, ok := v.str(path+".schedulerName", m, "schedulerName"); ok {
			p.SchedulerName = s
			v.dns(path+".schedulerName", s, validation.IsDNS1123Subdomain)
		}
		if s, ok := v.str(path+".priorityClassName", m, "priorityClassName"); ok {
			p.PriorityClassName = s
			v.dns(path+".priorityClassName", s, validation.IsDNS1123Subdomain)
		}
		out = append(out, p)
	}
	return out
}

// dns reports a name the apiserver would reject, with the library's reasons.
func (v *validator) dns(path, s string, check func(string) []string) {
	for _, msg := range check(s) {
		v.add(path, "%q: %s", s, msg)
	}
}

// labelSelector decodes a metav1.LabelSelector (absent: match everything)
// and validates it with apimachinery's own rules, so that the file accepts
// exactly what a Deployment's selector would.
func (v *validator) labelSelector(path string, x any) (metav1.LabelSelector, labels.Selector) {
	if x == nil {
		return metav1.LabelSelector{}, labels.Everything()
	}
	m := v.mapping(path, x)
	if m == nil {
		return metav1.LabelSelector{}, labels.Nothing()
	}
	v.unknown(path, m, "matchLabels", "matchExpressions")
	known := map[string]any{}
	for _, k := range []string{"matchLabels", "matchExpressions"} {
		if x, ok := m[k]; ok {
			known[k] = x
		}
	}
	raw, err := json.Marshal(known)
	if err != nil { // cannot happen: the value came from JSON
		v.add(path, "%s", err)
		return metav1.LabelSelector{}, labels.Nothing()
	}
	var ls metav1.LabelSelector
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a typo in a matchExpressions entry
	if err := dec.Decode(&ls); err != nil {
		v.add(path, "not a label selector (matchLabels: map of strings, matchExpressions: list of {key, operator, values}): %s", err)
		return metav1.LabelSelector{}, labels.Nothing()
	}
	errs := metav1validation.ValidateLabelSelector(&ls, metav1validation.LabelSelectorValidationOptions{}, field.NewPath(path))
	for _, e := range errs {
		v.add(e.Field, "%s", e.ErrorBody())
	}
	if len(errs) > 0 {
		return ls, labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		v.add(path, "%s", err)
		return ls, labels.Nothing()
	}
	return ls, sel
}
