package v1alpha1

import (
	"fmt"
	"time"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// Limits of the durations: the window bounds the usage history kept per
// node; a sample alignment above a minute would pair samples from different
// scrapes.
const (
	maxWindow          = policy.MaxWindow
	maxSampleAlignment = time.Minute
)

// Validate reports every invalid field of in at once, each with its path
// (for example pools[1].cpu.margin). It checks only the fields that are
// set, so it may run before or after SetDefaults; a pool's field it leaves
// out is the default block's, checked there once.
func Validate(in *ReclaimPolicy) field.ErrorList {
	var errs field.ErrorList
	if in.Default != nil {
		errs = append(errs, validateSettings(in.Default, field.NewPath("default"))...)
	}
	names := map[string]bool{}
	for i := range in.Pools {
		errs = append(errs, validatePool(&in.Pools[i], field.NewPath("pools").Index(i), names)...)
	}
	names = map[string]bool{}
	for i := range in.Profiles {
		errs = append(errs, validateProfile(&in.Profiles[i], field.NewPath("profiles").Index(i), names)...)
	}
	return errs
}

// ValidateSettings reports every field of settings built in code (not read
// from a file) that the file would refuse, under path.
func ValidateSettings(s policy.Settings, path *field.Path) field.ErrorList {
	fs := FromSettings(s)
	return validateSettings(&fs, path)
}

func validatePool(p *Pool, path *field.Path, names map[string]bool) field.ErrorList {
	errs := validateName(p.Name, path.Child("name"), names, nil)
	if len(p.NodeSelector) == 0 {
		errs = append(errs, field.Required(path.Child("nodeSelector"), "a pool needs at least one label to select its nodes"))
	}
	errs = append(errs, metav1validation.ValidateLabels(p.NodeSelector, path.Child("nodeSelector"))...)
	return append(errs, validateSettings(&p.Settings, path)...)
}

func validateProfile(p *Profile, path *field.Path, names map[string]bool) field.ErrorList {
	// The name goes into a pod annotation and kubectl columns.
	errs := validateName(p.Name, path.Child("name"), names, validation.IsDNS1123Label)
	opts := metav1validation.LabelSelectorValidationOptions{}
	if p.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.NamespaceSelector, opts, path.Child("namespaceSelector"))...)
	}
	if p.PodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.PodSelector, opts, path.Child("podSelector"))...)
	}
	errs = append(errs, validateDNS(p.SchedulerName, path.Child("schedulerName"))...)
	return append(errs, validateDNS(p.PriorityClassName, path.Child("priorityClassName"))...)
}

// validateName requires a unique name, in the form check accepts if any.
func validateName(name string, path *field.Path, names map[string]bool, check func(string) []string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "")}
	case names[name]:
		return field.ErrorList{field.Duplicate(path, name)}
	}
	names[name] = true
	var errs field.ErrorList
	if check != nil {
		for _, msg := range check(name) {
			errs = append(errs, field.Invalid(path, name, msg))
		}
	}
	return errs
}

// validateDNS checks an optional name the apiserver would otherwise refuse
// on the rewritten pod.
func validateDNS(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return nil
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateSettings(s *Settings, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Policy != nil && !policy.PolicyName(*s.Policy).Valid() {
		valid := make([]string, 0, len(policy.Policies))
		for _, p := range policy.Policies {
			valid = append(valid, string(p))
		}
		errs = append(errs, field.NotSupported(path.Child("policy"), *s.Policy, valid))
	}
	if s.Window != nil && (s.Window.Duration <= 0 || s.Window.Duration > maxWindow) {
		errs = append(errs, field.Invalid(path.Child("window"), s.Window.Duration.String(), fmt.Sprintf("must be in (0s, %s]", maxWindow)))
	}
	if s.Peak != nil {
		if _, err := policy.ParsePeak(*s.Peak); err != nil {
			errs = append(errs, field.Invalid(path.Child("peak"), *s.Peak, err.Error()))
		}
	}
	if a := s.SampleAlignment; a != nil && (a.Duration <= 0 || a.Duration > maxSampleAlignment) {
		errs = append(errs, field.Invalid(path.Child("sampleAlignment"), a.Duration.String(), fmt.Sprintf("must be in (0s, %s]", maxSampleAlignment)))
	}
	errs = append(errs, inRange(s.ChangeThreshold, path.Child("changeThreshold"), true)...)
	for _, r := range []struct {
		name string
		rs   *ResourceSettings
	}{{"cpu", s.CPU}, {"memory", s.Memory}} {
		if r.rs == nil {
			continue
		}
		rp := path.Child(r.name)
		// A margin of one would reclaim nothing, so it is excluded.
		errs = append(errs, inRange(r.rs.Margin, rp.Child("margin"), false)...)
		errs = append(errs, inRange(r.rs.MaxRatio, rp.Child("maxRatio"), true)...)
		if r.rs.Minimum != nil && *r.rs.Minimum < 0 {
			errs = append(errs, field.Invalid(rp.Child("minimum"), *r.rs.Minimum, "must be >= 0"))
		}
	}
	return errs
}

// inRange checks that a set fraction is in [0,1], or [0,1) without one.
func inRange(f *float64, path *field.Path, withOne bool) field.ErrorList {
	switch {
	case f == nil:
		return nil
	case withOne && *f >= 0 && *f <= 1:
		return nil
	case !withOne && *f >= 0 && *f < 1:
		return nil
	case withOne:
		return field.ErrorList{field.Invalid(path, *f, "must be in [0,1]")}
	}
	return field.ErrorList{field.Invalid(path, *f, "must be in [0,1)")}
}
