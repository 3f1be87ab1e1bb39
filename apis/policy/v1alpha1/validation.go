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
	// The memory thresholds are a pair: a pool that sets one is checked
	// against the other as the default block resolves it.
	base := policy.DefaultEviction().MemoryPressure
	if in.Default != nil {
		errs = append(errs, validateSettings(in.Default, field.NewPath("default"))...)
		base = resolvedMemoryPressure(base, in.Default.Eviction)
		errs = append(errs, validateThresholdPair(base, in.Default.Eviction, field.NewPath("default"))...)
	}
	names := map[string]bool{}
	for i := range in.Pools {
		path := field.NewPath("pools").Index(i)
		errs = append(errs, validatePool(&in.Pools[i], path, names)...)
		errs = append(errs, validateThresholdPair(resolvedMemoryPressure(base, in.Pools[i].Eviction), in.Pools[i].Eviction, path)...)
	}
	names = map[string]bool{}
	for i := range in.Profiles {
		errs = append(errs, validateProfile(&in.Profiles[i], field.NewPath("profiles").Index(i), names)...)
	}
	return errs
}

// ValidateSettings reports every field of settings built in code (not read
// from a file) that the file would refuse, under path. Zero eviction
// thresholds are the defaults (policy.EvictionSettings.OrDefault).
func ValidateSettings(s policy.Settings, path *field.Path) field.ErrorList {
	s.Eviction = s.Eviction.OrDefault()
	fs := FromSettings(s)
	return append(validateSettings(&fs, path), validateThresholdPair(s.Eviction.MemoryPressure, fs.Eviction, path)...)
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
	return append(errs, validateEviction(s.Eviction, path.Child("eviction"))...)
}

// validateEviction checks the eviction fields that are set. Thresholds are
// shares of allocatable: zero would evict on an idle node, so it is
// excluded.
func validateEviction(e *Eviction, path *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var errs field.ErrorList
	if m := e.MemoryPressure; m != nil {
		mp := path.Child("memoryPressure")
		errs = append(errs, positiveShare(m.EvictAbove, mp.Child("evictAbove"), true)...)
		errs = append(errs, positiveShare(m.EvictUntilBelow, mp.Child("evictUntilBelow"), false)...)
	}
	if c := e.CPUStarvation; c != nil {
		cp := path.Child("cpuStarvation")
		errs = append(errs, positiveShare(c.NodeUsageAbove, cp.Child("nodeUsageAbove"), true)...)
		errs = append(errs, positiveShare(c.PodUsageBelow, cp.Child("podUsageBelow"), true)...)
		if w := c.Window; w != nil && (w.Duration < policy.MinStarvationWindow || w.Duration > policy.MaxStarvationWindow) {
			errs = append(errs, field.Invalid(cp.Child("window"), w.Duration.String(),
				fmt.Sprintf("must be in [%s, %s]: starvation is a long condition, never a spike", policy.MinStarvationWindow, policy.MaxStarvationWindow)))
		}
	}
	return errs
}

// resolvedMemoryPressure is base with the memory thresholds e sets.
func resolvedMemoryPressure(base policy.MemoryPressure, e *Eviction) policy.MemoryPressure {
	if e != nil && e.MemoryPressure != nil {
		setIfSet(&base.EvictAbove, e.MemoryPressure.EvictAbove)
		setIfSet(&base.EvictUntilBelow, e.MemoryPressure.EvictUntilBelow)
	}
	return base
}

// validateThresholdPair requires evicting to stop below where it starts,
// for the thresholds in force in a block (m, resolved), reported on the
// field the block sets (e). A block that sets neither threshold has the
// pair of the block it inherits from, checked there.
func validateThresholdPair(m policy.MemoryPressure, e *Eviction, path *field.Path) field.ErrorList {
	if e == nil || e.MemoryPressure == nil || e.MemoryPressure.EvictAbove == nil && e.MemoryPressure.EvictUntilBelow == nil {
		return nil
	}
	if m.EvictUntilBelow < m.EvictAbove || m.EvictAbove <= 0 || m.EvictUntilBelow <= 0 {
		return nil // in order, or already reported as out of range
	}
	mp := path.Child("eviction", "memoryPressure")
	if e != nil && e.MemoryPressure != nil && e.MemoryPressure.EvictUntilBelow != nil {
		return field.ErrorList{field.Invalid(mp.Child("evictUntilBelow"), m.EvictUntilBelow,
			fmt.Sprintf("must be below evictAbove (%v): evicting stops under a lower threshold than it starts at", m.EvictAbove))}
	}
	return field.ErrorList{field.Invalid(mp.Child("evictAbove"), m.EvictAbove,
		fmt.Sprintf("must be above evictUntilBelow (%v): evicting stops under a lower threshold than it starts at", m.EvictUntilBelow))}
}

// positiveShare checks that a set share is in (0,1], or (0,1) without one.
func positiveShare(f *float64, path *field.Path, withOne bool) field.ErrorList {
	switch {
	case f == nil:
		return nil
	case *f > 0 && (*f < 1 || withOne && *f == 1):
		return nil
	case withOne:
		return field.ErrorList{field.Invalid(path, *f, "must be in (0,1]")}
	}
	return field.ErrorList{field.Invalid(path, *f, "must be in (0,1)")}
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
