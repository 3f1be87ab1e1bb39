package promserver

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
)

// mapResolver answers from "secret/ns/name/key" and "configmap/ns/name/key".
type mapResolver map[string]string

func (m mapResolver) get(kind, ns, name, key string) ([]byte, error) {
	v, ok := m[kind+"/"+ns+"/"+name+"/"+key]
	if !ok {
		return nil, fmt.Errorf("%s %s/%s has no key %s", kind, ns, name, key)
	}
	return []byte(v), nil
}

func (m mapResolver) Secret(ns, name, key string) ([]byte, error) {
	return m.get("secret", ns, name, key)
}
func (m mapResolver) ConfigMap(ns, name, key string) ([]byte, error) {
	return m.get("configmap", ns, name, key)
}

func podMonitor(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: pm, namespace: mon}\nspec:\n" + spec
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const selectorSpec = `  selector:
    matchExpressions:
      - {key: app.kubernetes.io/component, operator: In, values: [publisher]}
`

func TestTranslateCarriesTheEndpointsTLSAndAuthorizationIntoFiles(t *testing.T) {
	resolver := mapResolver{
		"secret/mon/scraper-token/token": "legacy-token",
		"configmap/mon/roots/ca.crt":     "CA PEM",
		"secret/mon/projected/token":     "projected-token",
		"secret/mon/client/tls.crt":      "CERT PEM",
		"secret/mon/client/tls.key":      "KEY PEM",
	}
	for _, tc := range []struct {
		name, endpoint string
		wantTLS        TLSConfig // file names relative to the options' Dir
		wantAuth       *Authorization
		wantFiles      map[string]string
		wantErr        string
	}{{
		name: "legacy token Secret, certificate not verified",
		endpoint: `port: metrics
      scheme: https
      tlsConfig: {insecureSkipVerify: true}
      authorization: {type: Bearer, credentials: {name: scraper-token, key: token}}`,
		wantTLS:   TLSConfig{InsecureSkipVerify: true},
		wantAuth:  &Authorization{Type: "Bearer", CredentialsFile: "mon_pm_0_credentials"},
		wantFiles: map[string]string{"mon_pm_0_credentials": "legacy-token"},
	}, {
		name: "CA from a ConfigMap, server name, credentials without a type",
		endpoint: `port: metrics
      scheme: https
      tlsConfig:
        ca: {configMap: {name: roots, key: ca.crt}}
        serverName: kube-reclaim-publisher.kube-reclaim.svc
      authorization: {credentials: {name: projected, key: token}}`,
		wantTLS:   TLSConfig{CAFile: "mon_pm_0_ca.crt", ServerName: "kube-reclaim-publisher.kube-reclaim.svc"},
		wantAuth:  &Authorization{Type: "Bearer", CredentialsFile: "mon_pm_0_credentials"},
		wantFiles: map[string]string{"mon_pm_0_ca.crt": "CA PEM", "mon_pm_0_credentials": "projected-token"},
	}, {
		name: "client certificate and the deprecated bearerTokenSecret",
		endpoint: `port: metrics
      tlsConfig:
        cert: {secret: {name: client, key: tls.crt}}
        keySecret: {name: client, key: tls.key}
      bearerTokenSecret: {name: scraper-token, key: token}`,
		wantTLS:   TLSConfig{CertFile: "mon_pm_0_client.crt", KeyFile: "mon_pm_0_client.key"},
		wantAuth:  &Authorization{Type: "Bearer", CredentialsFile: "mon_pm_0_credentials"},
		wantFiles: map[string]string{"mon_pm_0_client.crt": "CERT PEM", "mon_pm_0_client.key": "KEY PEM", "mon_pm_0_credentials": "legacy-token"},
	}, {
		name:     "a Secret that is missing fails the translation",
		endpoint: "port: metrics\n      authorization: {credentials: {name: nowhere, key: token}}",
		wantErr:  "secret mon/nowhere has no key token",
	}, {
		name:     "a field the translation does not know fails it",
		endpoint: "port: metrics\n      proxyUrl: http://proxy:3128",
		wantErr:  `unknown field "proxyUrl"`,
	}, {
		name:     "an endpoint without a port fails it",
		endpoint: "scheme: https",
		wantErr:  "names neither port nor portNumber",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pm := podMonitor(t, selectorSpec+"  podMetricsEndpoints:\n    - "+tc.endpoint+"\n")
			tr, err := Translate([]*unstructured.Unstructured{pm}, resolver, TranslateOptions{Kubeconfig: "/kc", Dir: "/files"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.ScrapeConfigs) != 1 {
				t.Fatalf("%d scrape configs, want 1", len(tr.ScrapeConfigs))
			}
			sc := tr.ScrapeConfigs[0]
			abs := func(f string) string {
				if f == "" {
					return ""
				}
				return "/files/" + f
			}
			want := TLSConfig{CAFile: abs(tc.wantTLS.CAFile), CertFile: abs(tc.wantTLS.CertFile), KeyFile: abs(tc.wantTLS.KeyFile),
				ServerName: tc.wantTLS.ServerName, InsecureSkipVerify: tc.wantTLS.InsecureSkipVerify}
			if sc.TLSConfig == nil || *sc.TLSConfig != want {
				t.Errorf("tls_config %+v, want %+v", sc.TLSConfig, want)
			}
			if tc.wantAuth != nil {
				wantAuth := Authorization{Type: tc.wantAuth.Type, CredentialsFile: abs(tc.wantAuth.CredentialsFile)}
				if sc.Authorization == nil || *sc.Authorization != wantAuth {
					t.Errorf("authorization %+v, want %+v", sc.Authorization, wantAuth)
				}
			}
			if len(tr.Files) != len(tc.wantFiles) {
				t.Errorf("files %v, want %v", tr.Files, tc.wantFiles)
			}
			for f, content := range tc.wantFiles {
				if got := string(tr.Files[abs(f)]); got != content {
					t.Errorf("file %s holds %q, want %q", f, got, content)
				}
			}
			if sd := sc.KubernetesSDConfigs; len(sd) != 1 || sd[0].Role != "pod" || sd[0].KubeconfigFile != "/kc" ||
				sd[0].Namespaces == nil || strings.Join(sd[0].Namespaces.Names, ",") != "mon" {
				t.Errorf("kubernetes_sd_configs %+v, want the pod role in the monitor's namespace through /kc", sd)
			}
		})
	}
}

// kept applies the keep and drop rules of rules to a pod's labels and
// container port name, the way Prometheus matches them: the source labels'
// values joined by ";", against the regex anchored at both ends.
func kept(t *testing.T, rules []RelabelConfig, podLabels map[string]string, port string) bool {
	t.Helper()
	meta := map[string]string{"__meta_kubernetes_pod_container_port_name": port, "__meta_kubernetes_pod_phase": "Running"}
	for k, v := range podLabels {
		meta["__meta_kubernetes_pod_label_"+sanitize(k)] = v
		meta["__meta_kubernetes_pod_labelpresent_"+sanitize(k)] = "true"
	}
	for _, r := range rules {
		if r.Action != "keep" && r.Action != "drop" {
			continue
		}
		vals := make([]string, len(r.SourceLabels))
		for i, l := range r.SourceLabels {
			vals[i] = meta[l]
		}
		re, err := regexp.Compile("^(?:" + r.Regex + ")$")
		if err != nil {
			t.Fatalf("regex %q: %v", r.Regex, err)
		}
		if re.MatchString(strings.Join(vals, ";")) != (r.Action == "keep") {
			return false
		}
	}
	return true
}

func TestTranslateSelectsThePodsAndPortTheMonitorNames(t *testing.T) {
	pm := podMonitor(t, `  selector:
    matchLabels: {app.kubernetes.io/name: kube-reclaim}
    matchExpressions:
      - {key: app.kubernetes.io/component, operator: In, values: [scheduler, extender]}
      - {key: canary, operator: NotIn, values: ["yes"]}
      - {key: tier, operator: Exists}
      - {key: legacy, operator: DoesNotExist}
  podMetricsEndpoints:
    - port: metrics
`)
	tr, err := Translate([]*unstructured.Unstructured{pm}, mapResolver{}, TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := tr.ScrapeConfigs[0].RelabelConfigs
	base := map[string]string{"app.kubernetes.io/name": "kube-reclaim", "app.kubernetes.io/component": "extender", "tier": "x"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		port   string
		want   bool
	}{
		{"every term holds", base, "metrics", true},
		{"the other value of the In term", with("app.kubernetes.io/component", "scheduler"), "metrics", true},
		{"another port of the same pod", base, "health", false},
		{"matchLabels value differs", with("app.kubernetes.io/name", "kube-reclaim-x"), "metrics", false},
		{"matchLabels label absent", with("app.kubernetes.io/name", ""), "metrics", false},
		{"In value outside the list", with("app.kubernetes.io/component", "webhook"), "metrics", false},
		{"NotIn value present", with("canary", "yes"), "metrics", false},
		{"NotIn label with another value", with("canary", "no"), "metrics", true},
		{"Exists label absent", with("tier", ""), "metrics", false},
		{"DoesNotExist label present", with("legacy", "1"), "metrics", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kept(t, rules, tc.labels, tc.port); got != tc.want {
				t.Errorf("kept %v, want %v (labels %v, port %s)", got, tc.want, tc.labels, tc.port)
			}
		})
	}
}

func TestTranslateSetsTheOperatorsLabelsThenTheMonitorsRelabelingsAndTheTestInterval(t *testing.T) {
	pm := podMonitor(t, selectorSpec+`  podMetricsEndpoints:
    - port: metrics
      interval: 30s
      scrapeTimeout: 20s
      relabelings:
        - {action: Replace, targetLabel: job, replacement: kube-reclaim-publisher}
`)
	for _, tc := range []struct {
		name, interval, wantInterval, wantTimeout string
	}{
		{"the monitor's interval", "", "30s", "20s"},
		{"the test's interval replaces it", "5s", "5s", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Translate([]*unstructured.Unstructured{pm}, mapResolver{}, TranslateOptions{Interval: tc.interval})
			if err != nil {
				t.Fatal(err)
			}
			sc := tr.ScrapeConfigs[0]
			if sc.ScrapeInterval != tc.wantInterval || sc.ScrapeTimeout != tc.wantTimeout {
				t.Errorf("interval %q timeout %q, want %q %q", sc.ScrapeInterval, sc.ScrapeTimeout, tc.wantInterval, tc.wantTimeout)
			}
			// The job the operator sets comes first; the monitor's own
			// relabeling, last, overrides it (lower-cased as Prometheus
			// reads actions).
			var jobs []string
			for _, r := range sc.RelabelConfigs {
				if r.TargetLabel == "job" {
					jobs = append(jobs, r.Action+" "+*r.Replacement)
				}
			}
			if got := strings.Join(jobs, ", "); got != "replace mon/pm, replace kube-reclaim-publisher" {
				t.Errorf("job relabelings %q", got)
			}
		})
	}
}

// Every PodMonitor the monitoring component ships translates, whatever TLS
// and authorization it configures: a field the translation does not know
// fails here before it fails the e2e test.
func TestTheShippedPodMonitorsTranslate(t *testing.T) {
	objs, err := deploy.ObjectsWith("mine", map[string]string{
		"mine/kustomization.yaml": "resources: [../default]\ncomponents: [../components/monitoring]\n"})
	if err != nil {
		t.Fatal(err)
	}
	var monitors []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" {
			monitors = append(monitors, o)
		}
	}
	if len(monitors) == 0 {
		t.Fatal("the monitoring component renders no PodMonitor")
	}
	// The scrape classes they name, as a Prometheus resource defines them.
	classes := map[string]ScrapeClass{}
	for _, m := range monitors {
		if name, _, _ := unstructured.NestedString(m.Object, "spec", "scrapeClass"); name != "" {
			classes[name] = ScrapeClass{Authorization: &Authorization{Type: "Bearer", CredentialsFile: "/token"}}
		}
	}
	tr, err := Translate(monitors, anyResolver{}, TranslateOptions{Dir: "/files", ScrapeClasses: classes})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range tr.ScrapeConfigs {
		t.Logf("%s: scheme %s, tls %+v, authorization %+v, %d relabelings", sc.JobName, sc.Scheme, sc.TLSConfig, sc.Authorization, len(sc.RelabelConfigs))
	}
}

// anyResolver answers every reference with its own name.
type anyResolver struct{}

func (anyResolver) Secret(ns, name, key string) ([]byte, error) {
	return []byte("secret " + ns + "/" + name + "/" + key), nil
}

func (anyResolver) ConfigMap(ns, name, key string) ([]byte, error) {
	return []byte("configmap " + ns + "/" + name + "/" + key), nil
}

func TestTranslateAppliesTheScrapeClassWhereTheEndpointSetsNothing(t *testing.T) {
	classes := map[string]ScrapeClass{"kube-reclaim": {
		Authorization: &Authorization{Type: "Bearer", CredentialsFile: "/var/run/secrets/kube-reclaim-metrics/token"},
		TLSConfig:     &TLSConfig{CAFile: "/class/ca.crt", ServerName: "class.example"},
	}}
	resolver := mapResolver{"secret/mon/tls/ca.crt": "CA PEM", "secret/mon/scraper-token/token": "legacy-token"}
	for _, tc := range []struct {
		name, class, endpoint string
		wantTLS               TLSConfig
		wantAuth              Authorization
		wantErr               string
	}{{
		name:  "the class's token, the endpoint's CA and server name",
		class: "kube-reclaim", endpoint: `tlsConfig:
        ca: {secret: {name: tls, key: ca.crt}}
        serverName: kube-reclaim-metrics.kube-reclaim.svc`,
		wantTLS:  TLSConfig{CAFile: "/files/mon_pm_0_ca.crt", ServerName: "kube-reclaim-metrics.kube-reclaim.svc"},
		wantAuth: Authorization{Type: "Bearer", CredentialsFile: "/var/run/secrets/kube-reclaim-metrics/token"},
	}, {
		name: "the endpoint sets neither: both from the class", class: "kube-reclaim", endpoint: "scheme: https",
		wantTLS:  TLSConfig{CAFile: "/class/ca.crt", ServerName: "class.example"},
		wantAuth: Authorization{Type: "Bearer", CredentialsFile: "/var/run/secrets/kube-reclaim-metrics/token"},
	}, {
		name: "the endpoint's own credentials win", class: "kube-reclaim",
		endpoint: "authorization: {credentials: {name: scraper-token, key: token}}",
		wantTLS:  TLSConfig{CAFile: "/class/ca.crt", ServerName: "class.example"},
		wantAuth: Authorization{Type: "Bearer", CredentialsFile: "/files/mon_pm_0_credentials"},
	}, {
		name: "a class the Prometheus resource does not define", class: "other", endpoint: "scheme: https",
		wantErr: `scrape class "other" is not defined`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pm := podMonitor(t, "  scrapeClass: "+tc.class+"\n"+selectorSpec+"  podMetricsEndpoints:\n    - port: metrics\n      "+tc.endpoint+"\n")
			tr, err := Translate([]*unstructured.Unstructured{pm}, resolver, TranslateOptions{Dir: "/files", ScrapeClasses: classes})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc := tr.ScrapeConfigs[0]
			if sc.TLSConfig == nil || *sc.TLSConfig != tc.wantTLS {
				t.Errorf("tls_config %+v, want %+v", sc.TLSConfig, tc.wantTLS)
			}
			if sc.Authorization == nil || *sc.Authorization != tc.wantAuth {
				t.Errorf("authorization %+v, want %+v", sc.Authorization, tc.wantAuth)
			}
		})
	}
}
