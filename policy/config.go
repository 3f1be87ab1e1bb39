package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Defaults of the settings (see Default).
const (
	DefaultPolicy          = PolicyUsage
	DefaultWindow          = 5 * time.Minute
	DefaultPeak            = PeakMax
	DefaultSampleAlignment = 10 * time.Second
	DefaultChangeThreshold = 0.10
	DefaultCPUMargin       = 0.35
	DefaultMemoryMargin    = 0.35
	DefaultMaxRatio        = 1.0
	// DefaultCPUMinimum is 100 millicores.
	DefaultCPUMinimum = 100
	// DefaultMemoryMinimum is 128 MiB.
	DefaultMemoryMinimum = 128 << 20
	// MaxWindow bounds the window so that the usage history stays bounded.
	MaxWindow = time.Hour
)

// Settings are the policy parameters in force for one node.
type Settings struct {
	// Policy is the formula (config key "policy").
	Policy PolicyName
	// Window is how far back usage samples count ("window", a Go duration).
	Window time.Duration
	// Peak is the statistic over the window ("peak": "max" or "p95").
	Peak Peak
	// SampleAlignment is how far apart a pod sample and a node sample may be
	// and still be treated as the same instant ("sampleAlignment"). A pod
	// sample further away counts as missing for that node sample.
	SampleAlignment time.Duration
	// ChangeThreshold is the relative change of a value above which the
	// publisher republishes it ("changeThreshold"; see Decide).
	ChangeThreshold float64
	// CPU and Memory are the per-resource parameters ("cpu", "memory").
	CPU    ResourceSettings
	Memory ResourceSettings
}

// ResourceSettings are the parameters of one resource.
type ResourceSettings struct {
	// Margin is the fraction of allocatable kept unreclaimed, in [0,1)
	// ("margin"). Applies to the usage and max-usage-request policies.
	Margin float64
	// MaxRatio caps the reclaimable amount at this fraction of allocatable,
	// in [0,1] ("maxRatio").
	MaxRatio float64
	// Minimum is the smallest amount worth publishing, in millicores or bytes
	// ("minimum", an integer); anything below publishes zero.
	Minimum int64
}

// DefaultSettings returns the built-in settings.
func DefaultSettings() Settings {
	return Settings{
		Policy:          DefaultPolicy,
		Window:          DefaultWindow,
		Peak:            DefaultPeak,
		SampleAlignment: DefaultSampleAlignment,
		ChangeThreshold: DefaultChangeThreshold,
		CPU:             ResourceSettings{Margin: DefaultCPUMargin, MaxRatio: DefaultMaxRatio, Minimum: DefaultCPUMinimum},
		Memory:          ResourceSettings{Margin: DefaultMemoryMargin, MaxRatio: DefaultMaxRatio, Minimum: DefaultMemoryMinimum},
	}
}

// Config is a validated policy file.
type Config struct {
	// Default applies to nodes that match no pool.
	Default Settings
	// Pools in file order; the first whose selector matches a node wins.
	Pools []Pool
	// Profiles in file order; the first that selects a pod rewrites it.
	Profiles []Profile
}

// Pool is a named override for the nodes its selector matches.
type Pool struct {
	Name string
	// NodeSelector: every key must be a node label with exactly this value.
	NodeSelector map[string]string
	// Settings are fully resolved: built-in defaults, then the file's
	// default block, then the pool's own fields.
	Settings Settings
}

// Default returns the configuration used when there is no file: the built-in
// settings and no pools.
func Default() *Config {
	return &Config{Default: DefaultSettings()}
}

// For returns the settings for a node with the given labels and the name of
// the pool that selected them ("" for the default). The first pool in file
// order whose selector matches wins.
func (c *Config) For(labels map[string]string) (Settings, string) {
	for i := range c.Pools {
		if c.Pools[i].Matches(labels) {
			return c.Pools[i].Settings, c.Pools[i].Name
		}
	}
	return c.Default, ""
}

// Matches reports whether every selector entry is a label with that value.
// An empty selector matches nothing (Load rejects it).
func (p *Pool) Matches(labels map[string]string) bool {
	if len(p.NodeSelector) == 0 {
		return false
	}
	for k, v := range p.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Label prefixes a kubelet cannot set on its own Node: NodeRestriction
// refuses node-restriction.kubernetes.io/ labels from a node's credentials,
// and deploy/ refuses kube-reclaim.io/ labels from them with a
// ValidatingAdmissionPolicy.
var trustedSelectorPrefixes = []string{"node-restriction.kubernetes.io/", "kube-reclaim.io/"}

// Warnings returns what is legal in c but unsafe, one sentence each: every
// pool nodeSelector key outside trustedSelectorPrefixes. A kubelet may set
// any other label of its own Node, so a node could choose the pool, and with
// it the margins and caps, that decide its own room. Not an error: files
// written before this check must keep loading.
func (c *Config) Warnings() []string {
	var out []string
	for i := range c.Pools {
		p := &c.Pools[i]
		for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
			if slices.ContainsFunc(trustedSelectorPrefixes, func(prefix string) bool { return strings.HasPrefix(k, prefix) }) {
				continue
			}
			out = append(out, fmt.Sprintf("pools[%d] (%q): nodeSelector key %q is a label the node's own kubelet can set, "+
				"so a node can put itself in this pool and choose the settings of its own room; "+
				"select nodes by labels under %s instead, which only administrators can set",
				i, p.Name, k, strings.Join(trustedSelectorPrefixes, " or ")))
		}
	}
	return out
}

// MaxWindow returns the longest window of the default and of every pool, the
// history a caller must keep.
func (c *Config) MaxWindow() time.Duration {
	w := c.Default.Window
	for i := range c.Pools {
		w = max(w, c.Pools[i].Settings.Window)
	}
	return w
}

// MaxSampleAlignment returns the largest sample alignment of the default and
// of every pool (DefaultSampleAlignment where one is not set, as Compute
// reads it): how much older than a window's first node sample a pod sample
// may be and still count.
func (c *Config) MaxSampleAlignment() time.Duration {
	a := c.Default.alignment()
	for i := range c.Pools {
		a = max(a, c.Pools[i].Settings.alignment())
	}
	return a
}

// alignment is the sample alignment Compute uses: DefaultSampleAlignment
// when none is set.
func (s Settings) alignment() time.Duration {
	if s.SampleAlignment <= 0 {
		return DefaultSampleAlignment
	}
	return s.SampleAlignment
}

// FieldError is one problem in a policy file, with the path of the field.
type FieldError struct {
	// Path such as "pools[1].cpu.margin"; empty for the document itself.
	Path string
	// Msg says what is wrong, for example "must be in [0,1), got 1.5".
	Msg string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Validate reports every invalid field of s at once (errors.Join of
// *FieldError), with paths under prefix (for example "default").
func (s *Settings) Validate(prefix string) error {
	var v validator
	v.settings(prefix, s)
	return errors.Join(v.errs...)
}

// Load parses and validates a policy file. Every problem is reported at once:
// the error is an errors.Join of *FieldError, one per line, each naming its
// field path. An empty document yields Default().
//
// The file format (keys are case-sensitive, unknown keys are errors):
//
//	default:            # optional; overrides the built-in defaults
//	  policy: usage     # usage | request | max-usage-request
//	  window: 5m        # Go duration, (0, 1h]
//	  peak: max         # max | pN, 0 < N <= 100 (nearest rank), e.g. p95
//	  sampleAlignment: 10s
//	  changeThreshold: 0.1   # [0,1]
//	  cpu:    {margin: 0.35, maxRatio: 1, minimum: 100}        # millicores
//	  memory: {margin: 0.35, maxRatio: 1, minimum: 134217728}  # bytes
//	pools:              # first match wins
//	- name: batch
//	  nodeSelector: {pool: batch}
//	  cpu: {margin: 0.2}   # any field of the default block
//	profiles:           # webhook: opted-in pods; first match wins
//	- name: batch
//	  namespaceSelector: {matchLabels: {team: data}}  # metav1.LabelSelector; absent: all
//	  podSelector: {matchLabels: {app: spark}}        # absent: every opted-in pod
//	  schedulerName: kube-reclaim-scheduler           # optional
//	  priorityClassName: batch-low                    # optional
func Load(data []byte) (*Config, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &FieldError{Msg: "not valid YAML: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &FieldError{Msg: "not valid YAML: " + err.Error()}
	}
	cfg := Default()
	if doc == nil {
		return cfg, nil
	}
	var v validator
	top, ok := doc.(map[string]any)
	if !ok {
		v.add("", "must be a mapping with keys default, pools and profiles, got %s", describe(doc))
		return nil, errors.Join(v.errs...)
	}
	v.unknown("", top, "default", "pools", "profiles")
	if d, ok := top["default"]; ok && d != nil {
		if m := v.mapping("default", d); m != nil {
			v.unknown("default", m, settingsKeys...)
			v.parseSettings("default", m, &cfg.Default)
		}
	}
	if p, ok := top["pools"]; ok && p != nil {
		list, ok := p.([]any)
		if !ok {
			v.add("pools", "must be a list, got %s", describe(p))
		}
		seen := map[string]int{}
		for i, item := range list {
			path := fmt.Sprintf("pools[%d]", i)
			m := v.mapping(path, item)
			if m == nil {
				continue
			}
			v.unknown(path, m, append([]string{"name", "nodeSelector"}, settingsKeys...)...)
			pool := Pool{Settings: cfg.Default}
			name, isString := v.str(path+".name", m, "name")
			pool.Name = name
			switch {
			case !isString && m["name"] != nil:
				// wrong type, already reported
			case pool.Name == "":
				v.add(path+".name", "must not be empty")
			case seen[pool.Name] > 0:
				v.add(path+".name", "duplicate pool name %q (also pools[%d])", pool.Name, seen[pool.Name]-1)
			default:
				seen[pool.Name] = i + 1
			}
			pool.NodeSelector = v.selector(path+".nodeSelector", m)
			v.parseSettings(path, m, &pool.Settings)
			cfg.Pools = append(cfg.Pools, pool)
		}
	}
	if p, ok := top["profiles"]; ok && p != nil {
		cfg.Profiles = v.profiles(p)
	}
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return cfg, nil
}

var settingsKeys = []string{"policy", "window", "peak", "sampleAlignment", "changeThreshold", "cpu", "memory"}

type validator struct{ errs []error }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// unknown reports every key of m not in known, sorted.
func (v *validator) unknown(path string, m map[string]any, known ...string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			v.add(join(path, k), "unknown field (known: %s)", strings.Join(known, ", "))
		}
	}
}

func (v *validator) mapping(path string, x any) map[string]any {
	m, ok := x.(map[string]any)
	if !ok {
		v.add(path, "must be a mapping, got %s", describe(x))
		return nil
	}
	return m
}

// str returns m[key] as a string; ok is false when absent or invalid.
func (v *validator) str(path string, m map[string]any, key string) (string, bool) {
	x, present := m[key]
	if !present || x == nil {
		return "", false
	}
	s, ok := x.(string)
	if !ok {
		v.add(path, "must be a string, got %s", describe(x))
		return "", false
	}
	return s, true
}

func (v *validator) number(path string, m map[string]any, key string) (float64, bool) {
	x, present := m[key]
	if !present || x == nil {
		return 0, false
	}
	n, ok := x.(json.Number)
	if !ok {
		v.add(path, "must be a number, got %s", describe(x))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		v.add(path, "must be a number, got %s", n)
		return 0, false
	}
	return f, true
}

func (v *validator) integer(path string, m map[string]any, key string) (int64, bool) {
	x, present := m[key]
	if !present || x == nil {
		return 0, false
	}
	n, ok := x.(json.Number)
	if !ok {
		v.add(path, "must be an integer, got %s", describe(x))
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	// YAML may render large integers as floats (1e9).
	if f, err := strconv.ParseFloat(string(n), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		return int64(f), true
	}
	v.add(path, "must be an integer, got %s", n)
	return 0, false
}

func (v *validator) duration(path string, m map[string]any, key string) (time.Duration, bool) {
	x, present := m[key]
	if !present || x == nil {
		return 0, false
	}
	s, ok := x.(string)
	if !ok {
		v.add(path, `must be a duration string such as "5m", got %s`, describe(x))
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.add(path, `must be a duration string such as "5m", got %q`, s)
		return 0, false
	}
	return d, true
}

func (v *validator) selector(path string, m map[string]any) map[string]string {
	x, present := m["nodeSelector"]
	if !present || x == nil {
		v.add(path, "must not be empty: a pool needs at least one label to select its nodes")
		return nil
	}
	sm := v.mapping(path, x)
	if sm == nil {
		return nil
	}
	if len(sm) == 0 {
		v.add(path, "must not be empty: a pool needs at least one label to select its nodes")
		return nil
	}
	sel := make(map[string]string, len(sm))
	for _, k := range slices.Sorted(maps.Keys(sm)) {
		kp := fmt.Sprintf("%s[%q]", path, k)
		if k == "" {
			v.add(kp, "label key must not be empty")
			continue
		}
		s, ok := sm[k].(string)
		if !ok {
			v.add(kp, "label value must be a string (quote it), got %s", describe(sm[k]))
			continue
		}
		sel[k] = s
	}
	return sel
}

// parseSettings overrides the fields of s present in m and validates them.
func (v *validator) parseSettings(path string, m map[string]any, s *Settings) {
	if p, ok := v.str(join(path, "policy"), m, "policy"); ok {
		s.Policy = PolicyName(p)
		v.policy(join(path, "policy"), s.Policy)
	}
	if d, ok := v.duration(join(path, "window"), m, "window"); ok {
		s.Window = d
		v.window(join(path, "window"), d)
	}
	if p, ok := v.str(join(path, "peak"), m, "peak"); ok {
		pk, err := ParsePeak(p)
		if err != nil {
			v.add(join(path, "peak"), "%s", err)
		}
		s.Peak = pk
	}
	if d, ok := v.duration(join(path, "sampleAlignment"), m, "sampleAlignment"); ok {
		s.SampleAlignment = d
		v.alignment(join(path, "sampleAlignment"), d)
	}
	if f, ok := v.number(join(path, "changeThreshold"), m, "changeThreshold"); ok {
		s.ChangeThreshold = f
		v.threshold(join(path, "changeThreshold"), f)
	}
	for _, r := range []struct {
		key string
		rs  *ResourceSettings
	}{{"cpu", &s.CPU}, {"memory", &s.Memory}} {
		x, present := m[r.key]
		if !present || x == nil {
			continue
		}
		rp := join(path, r.key)
		rm := v.mapping(rp, x)
		if rm == nil {
			continue
		}
		v.unknown(rp, rm, "margin", "maxRatio", "minimum")
		if f, ok := v.number(rp+".margin", rm, "margin"); ok {
			r.rs.Margin = f
			v.margin(rp+".margin", f)
		}
		if f, ok := v.number(rp+".maxRatio", rm, "maxRatio"); ok {
			r.rs.MaxRatio = f
			v.maxRatio(rp+".maxRatio", f)
		}
		if i, ok := v.integer(rp+".minimum", rm, "minimum"); ok {
			r.rs.Minimum = i
			v.minimum(rp+".minimum", i)
		}
	}
}

// settings validates every field of a built Settings (for hand-built values).
func (v *validator) settings(path string, s *Settings) {
	v.policy(join(path, "policy"), s.Policy)
	v.window(join(path, "window"), s.Window)
	v.alignment(join(path, "sampleAlignment"), s.SampleAlignment)
	v.threshold(join(path, "changeThreshold"), s.ChangeThreshold)
	for _, r := range []struct {
		key string
		rs  ResourceSettings
	}{{"cpu", s.CPU}, {"memory", s.Memory}} {
		rp := join(path, r.key)
		v.margin(rp+".margin", r.rs.Margin)
		v.maxRatio(rp+".maxRatio", r.rs.MaxRatio)
		v.minimum(rp+".minimum", r.rs.Minimum)
	}
}

func (v *validator) policy(path string, p PolicyName) {
	if !p.Valid() {
		v.add(path, "unknown policy %q (want usage, request or max-usage-request)", string(p))
	}
}

func (v *validator) window(path string, d time.Duration) {
	if d <= 0 || d > MaxWindow {
		v.add(path, "must be in (0s, %s], got %s", MaxWindow, d)
	}
}

func (v *validator) alignment(path string, d time.Duration) {
	if d <= 0 || d > time.Minute {
		v.add(path, "must be in (0s, 1m0s], got %s", d)
	}
}

func (v *validator) threshold(path string, f float64) {
	if !(f >= 0 && f <= 1) {
		v.add(path, "must be in [0,1], got %s", formatFloat(f))
	}
}

func (v *validator) margin(path string, f float64) {
	if !(f >= 0 && f < 1) {
		v.add(path, "must be in [0,1), got %s", formatFloat(f))
	}
}

func (v *validator) maxRatio(path string, f float64) {
	if !(f >= 0 && f <= 1) {
		v.add(path, "must be in [0,1], got %s", formatFloat(f))
	}
}

func (v *validator) minimum(path string, i int64) {
	if i < 0 {
		v.add(path, "must be >= 0, got %d", i)
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func describe(x any) string {
	switch t := x.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", t)
	case json.Number:
		return "number " + string(t)
	case bool:
		return "boolean " + strconv.FormatBool(t)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", x)
}
