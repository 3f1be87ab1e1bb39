// Package promserver runs a real Prometheus server against a test cluster:
// the scrape configuration the Prometheus operator would generate from the
// shipped PodMonitors, the shipped PrometheusRule's groups as a rules file,
// and the server itself (built by test/cluster from the module proxy) under
// the cluster's supervision.
package promserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PodMonitor is the part of a monitoring.coreos.com/v1 PodMonitor's spec
// that is translated. Decoding is strict: a field the shipped PodMonitors
// start to use and the translation does not know fails the translation
// instead of being dropped without a word.
type podMonitorSpec struct {
	// ScrapeClass names a scrape class of the Prometheus resource, whose
	// TLS settings and authorization apply where an endpoint has none.
	ScrapeClass       string `json:"scrapeClass"`
	NamespaceSelector struct {
		Any        bool     `json:"any"`
		MatchNames []string `json:"matchNames"`
	} `json:"namespaceSelector"`
	Selector            metav1.LabelSelector `json:"selector"`
	PodMetricsEndpoints []podMetricsEndpoint `json:"podMetricsEndpoints"`
}

type podMetricsEndpoint struct {
	Port              string             `json:"port"`
	PortNumber        int32              `json:"portNumber"`
	Path              string             `json:"path"`
	Scheme            string             `json:"scheme"`
	Interval          string             `json:"interval"`
	ScrapeTimeout     string             `json:"scrapeTimeout"`
	HonorLabels       bool               `json:"honorLabels"`
	FilterRunning     *bool              `json:"filterRunning"`
	TLSConfig         *safeTLSConfig     `json:"tlsConfig"`
	Authorization     *safeAuthorization `json:"authorization"`
	BearerTokenSecret *keySelector       `json:"bearerTokenSecret"`
	Relabelings       []relabelConfig    `json:"relabelings"`
	MetricRelabelings []relabelConfig    `json:"metricRelabelings"`
}

type keySelector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional"`
}

// secretOrConfigMap names a key of either a Secret or a ConfigMap.
type secretOrConfigMap struct {
	Secret    *keySelector `json:"secret"`
	ConfigMap *keySelector `json:"configMap"`
}

type safeTLSConfig struct {
	CA                 *secretOrConfigMap `json:"ca"`
	Cert               *secretOrConfigMap `json:"cert"`
	KeySecret          *keySelector       `json:"keySecret"`
	ServerName         string             `json:"serverName"`
	InsecureSkipVerify bool               `json:"insecureSkipVerify"`
}

type safeAuthorization struct {
	Type        string       `json:"type"`
	Credentials *keySelector `json:"credentials"`
}

type relabelConfig struct {
	SourceLabels []string `json:"sourceLabels"`
	Separator    *string  `json:"separator"`
	TargetLabel  string   `json:"targetLabel"`
	Regex        string   `json:"regex"`
	Modulus      uint64   `json:"modulus"`
	Replacement  *string  `json:"replacement"`
	Action       string   `json:"action"`
}

// ScrapeConfig is one scrape_configs entry of prometheus.yml.
type ScrapeConfig struct {
	JobName              string          `json:"job_name"`
	HonorLabels          bool            `json:"honor_labels,omitempty"`
	ScrapeInterval       string          `json:"scrape_interval,omitempty"`
	ScrapeTimeout        string          `json:"scrape_timeout,omitempty"`
	MetricsPath          string          `json:"metrics_path,omitempty"`
	Scheme               string          `json:"scheme,omitempty"`
	TLSConfig            *TLSConfig      `json:"tls_config,omitempty"`
	Authorization        *Authorization  `json:"authorization,omitempty"`
	KubernetesSDConfigs  []KubernetesSD  `json:"kubernetes_sd_configs"`
	RelabelConfigs       []RelabelConfig `json:"relabel_configs,omitempty"`
	MetricRelabelConfigs []RelabelConfig `json:"metric_relabel_configs,omitempty"`
}

// TLSConfig is Prometheus's tls_config.
type TLSConfig struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Authorization is Prometheus's authorization block.
type Authorization struct {
	Type            string `json:"type,omitempty"`
	CredentialsFile string `json:"credentials_file,omitempty"`
}

// KubernetesSD is one kubernetes_sd_configs entry.
type KubernetesSD struct {
	Role           string      `json:"role"`
	KubeconfigFile string      `json:"kubeconfig_file,omitempty"`
	Namespaces     *Namespaces `json:"namespaces,omitempty"`
}

// Namespaces limits a kubernetes_sd_configs entry.
type Namespaces struct {
	Names []string `json:"names"`
}

// RelabelConfig is one relabel_configs entry.
type RelabelConfig struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// ScrapeClass is a scrapeClasses entry of the Prometheus resource, which
// whoever runs Prometheus defines (files in Prometheus's own file system).
type ScrapeClass struct {
	TLSConfig     *TLSConfig
	Authorization *Authorization
}

// Resolver reads the Secrets and ConfigMaps a PodMonitor names, in its own
// namespace, as the operator does before it writes them into Prometheus's
// configuration.
type Resolver interface {
	Secret(namespace, name, key string) ([]byte, error)
	ConfigMap(namespace, name, key string) ([]byte, error)
}

// TranslateOptions are what a PodMonitor does not say: how Prometheus
// reaches the API server, where referenced credentials go, and the test's
// own scrape interval.
type TranslateOptions struct {
	// Kubeconfig is the kubernetes_sd_configs kubeconfig_file.
	Kubeconfig string
	// Dir holds the files of the credentials, CAs and client certificates
	// the PodMonitors reference (returned in Translation.Files).
	Dir string
	// Interval, when set, replaces every endpoint's interval, and caps its
	// scrapeTimeout.
	Interval string
	// ScrapeClasses are the Prometheus resource's, by name. A monitor that
	// names one not here is skipped by the operator: an error here.
	ScrapeClasses map[string]ScrapeClass
}

// Translation is the scrape configuration of some PodMonitors and the files
// it refers to (path under TranslateOptions.Dir -> content).
type Translation struct {
	ScrapeConfigs []ScrapeConfig
	Files         map[string][]byte
}

// Translate turns PodMonitors into the scrape configuration the Prometheus
// operator generates for them: pod-role service discovery limited to the
// monitor's namespaces, the selector and port as keep rules, the operator's
// namespace, pod, container, job and endpoint labels, then the monitor's
// own relabelings; its scheme, path, TLS and authorization with the
// referenced Secrets and ConfigMaps read through r.
func Translate(monitors []*unstructured.Unstructured, r Resolver, o TranslateOptions) (*Translation, error) {
	tr := &Translation{Files: map[string][]byte{}}
	var errs []error
	for _, m := range monitors {
		if m.GetKind() != "PodMonitor" {
			errs = append(errs, fmt.Errorf("%s %s/%s: not a PodMonitor", m.GetKind(), m.GetNamespace(), m.GetName()))
			continue
		}
		cfgs, err := translateMonitor(m, r, o, tr.Files)
		if err != nil {
			errs = append(errs, fmt.Errorf("PodMonitor %s/%s: %w", m.GetNamespace(), m.GetName(), err))
			continue
		}
		tr.ScrapeConfigs = append(tr.ScrapeConfigs, cfgs...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tr, nil
}

func translateMonitor(m *unstructured.Unstructured, r Resolver, o TranslateOptions, files map[string][]byte) ([]ScrapeConfig, error) {
	raw, ok := m.Object["spec"]
	if !ok {
		return nil, errors.New("no spec")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var spec podMonitorSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("spec not translated: %w", err)
	}
	ns, name := m.GetNamespace(), m.GetName()
	var sd KubernetesSD
	sd.Role, sd.KubeconfigFile = "pod", o.Kubeconfig
	switch {
	case spec.NamespaceSelector.Any:
	case len(spec.NamespaceSelector.MatchNames) > 0:
		sd.Namespaces = &Namespaces{Names: spec.NamespaceSelector.MatchNames}
	default:
		sd.Namespaces = &Namespaces{Names: []string{ns}}
	}
	var class ScrapeClass
	if spec.ScrapeClass != "" {
		c, ok := o.ScrapeClasses[spec.ScrapeClass]
		if !ok {
			return nil, fmt.Errorf("scrape class %q is not defined (the operator would skip the monitor)", spec.ScrapeClass)
		}
		class = c
	}
	selector, err := selectorRelabelings(spec.Selector)
	if err != nil {
		return nil, err
	}
	var out []ScrapeConfig
	for i, ep := range spec.PodMetricsEndpoints {
		sc := ScrapeConfig{
			JobName:             fmt.Sprintf("podMonitor/%s/%s/%d", ns, name, i),
			HonorLabels:         ep.HonorLabels,
			ScrapeInterval:      ep.Interval,
			ScrapeTimeout:       ep.ScrapeTimeout,
			MetricsPath:         ep.Path,
			Scheme:              ep.Scheme,
			KubernetesSDConfigs: []KubernetesSD{sd},
		}
		if o.Interval != "" {
			sc.ScrapeInterval = o.Interval
			sc.ScrapeTimeout = "" // Prometheus's default: the interval, at most 10s
		}
		prefix := filepath.Join(o.Dir, fmt.Sprintf("%s_%s_%d_", ns, name, i))
		if sc.TLSConfig, err = translateTLS(ep.TLSConfig, ns, prefix, r, files); err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		if sc.Authorization, err = translateAuthorization(ep, ns, prefix, r, files); err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i, err)
		}
		sc.TLSConfig = withClassTLS(sc.TLSConfig, class.TLSConfig)
		if sc.Authorization == nil && class.Authorization != nil {
			a := *class.Authorization
			sc.Authorization = &a
		}
		sc.RelabelConfigs = append(sc.RelabelConfigs, selector...)
		if ep.FilterRunning == nil || *ep.FilterRunning {
			sc.RelabelConfigs = append(sc.RelabelConfigs, RelabelConfig{Action: "drop",
				SourceLabels: []string{"__meta_kubernetes_pod_phase"}, Regex: "(Failed|Succeeded)"})
		}
		switch {
		case ep.Port != "":
			sc.RelabelConfigs = append(sc.RelabelConfigs, RelabelConfig{Action: "keep",
				SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: regexp.QuoteMeta(ep.Port)})
		case ep.PortNumber != 0:
			sc.RelabelConfigs = append(sc.RelabelConfigs, RelabelConfig{Action: "keep",
				SourceLabels: []string{"__meta_kubernetes_pod_container_port_number"}, Regex: fmt.Sprint(ep.PortNumber)})
		default:
			return nil, fmt.Errorf("endpoint %d names neither port nor portNumber", i)
		}
		endpoint := ep.Port
		if endpoint == "" {
			endpoint = fmt.Sprint(ep.PortNumber)
		}
		for _, l := range []struct{ target, source string }{
			{"namespace", "__meta_kubernetes_namespace"},
			{"container", "__meta_kubernetes_pod_container_name"},
			{"pod", "__meta_kubernetes_pod_name"},
		} {
			sc.RelabelConfigs = append(sc.RelabelConfigs, RelabelConfig{Action: "replace", SourceLabels: []string{l.source}, TargetLabel: l.target})
		}
		sc.RelabelConfigs = append(sc.RelabelConfigs,
			RelabelConfig{Action: "replace", TargetLabel: "job", Replacement: ptr(ns + "/" + name)},
			RelabelConfig{Action: "replace", TargetLabel: "endpoint", Replacement: ptr(endpoint)})
		for _, rl := range ep.Relabelings {
			sc.RelabelConfigs = append(sc.RelabelConfigs, translateRelabel(rl))
		}
		for _, rl := range ep.MetricRelabelings {
			sc.MetricRelabelConfigs = append(sc.MetricRelabelConfigs, translateRelabel(rl))
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		return nil, errors.New("no podMetricsEndpoints")
	}
	return out, nil
}

// selectorRelabelings are the keep and drop rules of a label selector, on
// the pod labels kubernetes_sd_configs reports (names sanitised as it does).
func selectorRelabelings(s metav1.LabelSelector) ([]RelabelConfig, error) {
	var out []RelabelConfig
	for _, k := range sortedKeys(s.MatchLabels) {
		out = append(out, RelabelConfig{Action: "keep", SourceLabels: labelSources(k),
			Regex: "(" + regexp.QuoteMeta(s.MatchLabels[k]) + ");true"})
	}
	for _, e := range s.MatchExpressions {
		quoted := make([]string, len(e.Values))
		for i, v := range e.Values {
			quoted[i] = regexp.QuoteMeta(v)
		}
		values := "(" + strings.Join(quoted, "|") + ");true"
		present := []string{"__meta_kubernetes_pod_labelpresent_" + sanitize(e.Key)}
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			out = append(out, RelabelConfig{Action: "keep", SourceLabels: labelSources(e.Key), Regex: values})
		case metav1.LabelSelectorOpNotIn:
			out = append(out, RelabelConfig{Action: "drop", SourceLabels: labelSources(e.Key), Regex: values})
		case metav1.LabelSelectorOpExists:
			out = append(out, RelabelConfig{Action: "keep", SourceLabels: present, Regex: "true"})
		case metav1.LabelSelectorOpDoesNotExist:
			out = append(out, RelabelConfig{Action: "drop", SourceLabels: present, Regex: "true"})
		default:
			return nil, fmt.Errorf("selector operator %q", e.Operator)
		}
	}
	return out, nil
}

func labelSources(key string) []string {
	k := sanitize(key)
	return []string{"__meta_kubernetes_pod_label_" + k, "__meta_kubernetes_pod_labelpresent_" + k}
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// sanitize is how service discovery turns a Kubernetes label key into a
// Prometheus label name.
func sanitize(key string) string { return invalidLabelChars.ReplaceAllString(key, "_") }

func translateRelabel(r relabelConfig) RelabelConfig {
	return RelabelConfig{SourceLabels: r.SourceLabels, Separator: r.Separator, TargetLabel: r.TargetLabel, Regex: r.Regex,
		Modulus: r.Modulus, Replacement: r.Replacement, Action: strings.ToLower(r.Action)}
}

func translateTLS(t *safeTLSConfig, ns, prefix string, r Resolver, files map[string][]byte) (*TLSConfig, error) {
	if t == nil {
		return nil, nil
	}
	out := &TLSConfig{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	var key *secretOrConfigMap
	if t.KeySecret != nil {
		key = &secretOrConfigMap{Secret: t.KeySecret}
	}
	// Each reference is read and written to a file the same way.
	for _, f := range []struct {
		field, file string
		ref         *secretOrConfigMap
		dst         *string
	}{
		{"ca", "ca.crt", t.CA, &out.CAFile},
		{"cert", "client.crt", t.Cert, &out.CertFile},
		{"keySecret", "client.key", key, &out.KeyFile},
	} {
		if f.ref == nil {
			continue
		}
		var err error
		if *f.dst, err = resolveFile(f.ref, ns, prefix+f.file, r, files); err != nil {
			return nil, fmt.Errorf("tlsConfig.%s: %w", f.field, err)
		}
	}
	return out, nil
}

// withClassTLS is the endpoint's TLS settings with the scrape class's
// filling what the endpoint leaves empty.
func withClassTLS(ep, class *TLSConfig) *TLSConfig {
	if class == nil {
		return ep
	}
	if ep == nil {
		c := *class
		return &c
	}
	out := *ep
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&out.CAFile, class.CAFile}, {&out.CertFile, class.CertFile}, {&out.KeyFile, class.KeyFile}, {&out.ServerName, class.ServerName},
	} {
		if *f.dst == "" {
			*f.dst = f.src
		}
	}
	out.InsecureSkipVerify = out.InsecureSkipVerify || class.InsecureSkipVerify
	return &out
}

func translateAuthorization(ep podMetricsEndpoint, ns, prefix string, r Resolver, files map[string][]byte) (*Authorization, error) {
	var typ string
	var creds *keySelector
	switch {
	case ep.Authorization != nil && ep.BearerTokenSecret != nil:
		return nil, errors.New("both authorization and bearerTokenSecret")
	case ep.Authorization != nil:
		typ, creds = ep.Authorization.Type, ep.Authorization.Credentials
		if typ == "" {
			typ = "Bearer"
		}
	case ep.BearerTokenSecret != nil:
		typ, creds = "Bearer", ep.BearerTokenSecret
	default:
		return nil, nil
	}
	out := &Authorization{Type: typ}
	if creds != nil {
		f, err := resolveFile(&secretOrConfigMap{Secret: creds}, ns, prefix+"credentials", r, files)
		if err != nil {
			return nil, fmt.Errorf("authorization credentials: %w", err)
		}
		out.CredentialsFile = f
	}
	return out, nil
}

// resolveFile reads what ref names and records it as the file path.
func resolveFile(ref *secretOrConfigMap, ns, path string, r Resolver, files map[string][]byte) (string, error) {
	var data []byte
	var err error
	switch {
	case ref.Secret != nil && ref.ConfigMap != nil:
		return "", errors.New("both secret and configMap")
	case ref.Secret != nil:
		data, err = r.Secret(ns, ref.Secret.Name, ref.Secret.Key)
	case ref.ConfigMap != nil:
		data, err = r.ConfigMap(ns, ref.ConfigMap.Name, ref.ConfigMap.Key)
	default:
		return "", errors.New("names neither a secret nor a configMap")
	}
	if err != nil {
		return "", err
	}
	if len(data) == 0 {
		return "", errors.New("empty")
	}
	files[path] = data
	return path, nil
}

func ptr[T any](v T) *T { return &v }
