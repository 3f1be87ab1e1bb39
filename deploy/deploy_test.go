package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	goMaps "maps"
	"net"
	"net/url"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/publisher"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

const (
	namespace = "kube-reclaim"
	image     = "ghcr.io/kube-reclaim/kube-reclaim"
	// extenderNamespace holds only deploy/own-scheduler's host-network
	// extender (privileged Pod Security level).
	extenderNamespace = "kube-reclaim-extender"
	// ownScheduler is the overlay without kube-reclaim-scheduler.
	ownScheduler = "own-scheduler"
)

// releaseTag is the one tag every overlay installs (components/version).
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// bundle is one rendered overlay, indexed by kind/namespace/name.
type bundle struct {
	overlay string
	objs    []*unstructured.Unstructured
	byKey   map[string]*unstructured.Unstructured
}

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func render(t *testing.T, dir string) *bundle {
	t.Helper()
	objs, err := Objects(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{overlay: dir, objs: objs, byKey: map[string]*unstructured.Unstructured{}}
	for _, o := range objs {
		k := key(o.GetKind(), o.GetNamespace(), o.GetName())
		if _, dup := b.byKey[k]; dup {
			t.Fatalf("%s: %s rendered twice", dir, k)
		}
		b.byKey[k] = o
	}
	return b
}

func (b *bundle) kind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range b.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// get decodes the object kind/ns/name into out, failing when it is missing.
func (b *bundle) get(t *testing.T, kind, ns, name string, out interface{}) {
	t.Helper()
	o, ok := b.byKey[key(kind, ns, name)]
	if !ok {
		t.Fatalf("%s: no %s %s/%s rendered", b.overlay, kind, ns, name)
	}
	decode(t, o, out)
}

func (b *bundle) has(kind, ns, name string) bool {
	_, ok := b.byKey[key(kind, ns, name)]
	return ok
}

// decode converts strictly: a misspelt field in the YAML is an error.
func decode(t *testing.T, o *unstructured.Unstructured, out interface{}) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
}

func (b *bundle) deployments(t *testing.T) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, o := range b.kind("Deployment") {
		var d appsv1.Deployment
		decode(t, o, &d)
		out = append(out, d)
	}
	return out
}

// workload is the pod template of a Deployment or a DaemonSet.
type workload struct {
	kind, name, namespace string
	selector              *metav1.LabelSelector
	labels                map[string]string
	spec                  corev1.PodSpec
}

func (w workload) String() string { return w.kind + " " + w.name }

func (b *bundle) workloads(t *testing.T) []workload {
	t.Helper()
	var out []workload
	for _, d := range b.deployments(t) {
		out = append(out, workload{"Deployment", d.Name, d.Namespace, d.Spec.Selector, d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	for _, o := range b.kind("DaemonSet") {
		var d appsv1.DaemonSet
		decode(t, o, &d)
		out = append(out, workload{"DaemonSet", d.Name, d.Namespace, d.Spec.Selector, d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	return out
}

// pluginScheduler is the overlay whose scheduler pod runs
// kube-reclaim-scheduler with the placement plugin: everything but that pod
// and its configuration is deploy/default's, so the tables of the other
// overlays leave it to TestPluginSchedulerOverlay.
const pluginScheduler = "plugin-scheduler"

// extenderOverlays are the overlays of the extender topologies.
func extenderOverlays() []string {
	var out []string
	for _, o := range Overlays {
		if o != pluginScheduler {
			out = append(out, o)
		}
	}
	return out
}

// renderAll renders the overlays of the extender topologies.
func renderAll(t *testing.T) []*bundle {
	t.Helper()
	var out []*bundle
	for _, o := range extenderOverlays() {
		out = append(out, render(t, o))
	}
	return out
}

func TestEveryKustomizationRenders(t *testing.T) {
	dirs := append([]string{"."}, Overlays...)
	dirs = append(dirs, "base/common", "base/publisher", "base/webhook", "base/scheduler", "webhook", "scheduler")
	for _, dir := range dirs {
		if _, err := Render(dir); err != nil {
			t.Errorf("%v", err)
		}
	}
	top, err := Render(".")
	if err != nil {
		t.Fatal(err)
	}
	def, err := Render("default")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(top, def) {
		t.Error("deploy/ (kubectl apply -k deploy/) does not render the same objects as deploy/default")
	}
}

// admissionPolicies are the ValidatingAdmissionPolicies every overlay
// installs, each with a binding of the same name.
var admissionPolicies = []string{"kube-reclaim-reclaimable-annotation", "kube-reclaim-publisher-node-writes",
	"kube-reclaim-webhook-configuration", "kube-reclaim-node-keys", "kube-reclaim-own-objects"}

func TestEveryOverlayInstallsEveryRole(t *testing.T) {
	want := []string{
		key("Namespace", "", namespace),
		key("ConfigMap", namespace, "kube-reclaim-policy"),
		key("Deployment", namespace, "kube-reclaim-publisher"),
		key("Deployment", namespace, "kube-reclaim-webhook"),
		key("Service", namespace, "kube-reclaim-webhook"),
		key("MutatingWebhookConfiguration", "", webhook.DefaultConfigurationName),
		key("ClusterRole", "", "kube-reclaim-metrics-reader"),
	}
	for _, p := range admissionPolicies {
		want = append(want, key("ValidatingAdmissionPolicy", "", p), key("ValidatingAdmissionPolicyBinding", "", p))
	}
	// The extender runs beside a kube-scheduler: a sidecar of
	// kube-reclaim-scheduler, or a DaemonSet beside the cluster's own. No
	// Service: nothing but that scheduler may reach it.
	perOverlay := map[string][]string{
		"default":      {key("Deployment", namespace, "kube-reclaim-scheduler")},
		"cert-manager": {key("Deployment", namespace, "kube-reclaim-scheduler")},
		ownScheduler:   {key("Namespace", "", extenderNamespace), key("DaemonSet", extenderNamespace, "kube-reclaim-extender")},
	}
	for _, b := range renderAll(t) {
		for _, k := range append(slices.Clone(want), perOverlay[b.overlay]...) {
			if _, ok := b.byKey[k]; !ok {
				t.Errorf("%s: %s missing", b.overlay, k)
			}
		}
		if len(b.kind("Deployment"))+len(b.kind("DaemonSet")) != 3 || len(b.kind("Service")) != 1 {
			t.Errorf("%s: %d Deployments, %d DaemonSets and %d Services, want 3 workloads and the webhook's Service",
				b.overlay, len(b.kind("Deployment")), len(b.kind("DaemonSet")), len(b.kind("Service")))
		}
		for _, o := range b.objs {
			if o.GetKind() == "Namespace" || o.GetNamespace() == "" {
				continue
			}
			// Only the scheduler's authentication-reader binding and the
			// own-scheduler extender live outside.
			if o.GetNamespace() != namespace && !(o.GetKind() == "RoleBinding" && o.GetNamespace() == "kube-system") &&
				!(b.overlay == ownScheduler && o.GetNamespace() == extenderNamespace) {
				t.Errorf("%s: %s %s/%s outside namespace %s", b.overlay, o.GetKind(), o.GetNamespace(), o.GetName(), namespace)
			}
		}
	}
}

func TestDeploymentsAreHardenedAndProbed(t *testing.T) {
	for _, b := range renderAll(t) {
		for _, d := range b.workloads(t) {
			where := b.overlay + ": " + d.String()
			spec := d.spec
			if spec.PriorityClassName != "system-cluster-critical" {
				t.Errorf("%s: priorityClassName %q", where, spec.PriorityClassName)
			}
			if spec.ServiceAccountName == "" || !b.has("ServiceAccount", d.namespace, spec.ServiceAccountName) {
				t.Errorf("%s: serviceAccountName %q is not rendered", where, spec.ServiceAccountName)
			}
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: pod securityContext %+v is not restricted (runAsNonRoot, non-zero runAsUser, seccomp RuntimeDefault)", where, psc)
			}
			// Only the own-scheduler extender shares the host network, with
			// its kube-scheduler static pod (TestOwnSchedulerExtender).
			hostNetOK := b.overlay == ownScheduler && d.kind == "DaemonSet" && d.namespace == extenderNamespace
			if (spec.HostNetwork && !hostNetOK) || spec.HostPID || spec.HostIPC || len(spec.InitContainers) > 0 {
				t.Errorf("%s: host namespaces or init containers", where)
			}
			if d.selector == nil || !mapsSubset(d.selector.MatchLabels, d.labels) || len(d.selector.MatchLabels) == 0 {
				t.Errorf("%s: selector %v does not select its template %v", where, d.selector, d.labels)
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("%s: hostPath volume %s", where, v.Name)
				}
			}
			for _, c := range spec.Containers {
				cw := where + " container " + c.Name
				sc := c.SecurityContext
				if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
					sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
					sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
					(sc.Privileged != nil && *sc.Privileged) {
					t.Errorf("%s: securityContext %+v is not restricted", cw, sc)
				}
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					req, okReq := c.Resources.Requests[r]
					lim, okLim := c.Resources.Limits[r]
					if !okReq || !okLim || req.Cmp(lim) > 0 || req.IsZero() {
						t.Errorf("%s: %s request %v limit %v: both needed, request <= limit", cw, r, req.String(), lim.String())
					}
				}
				for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name {
						t.Errorf("%s: want an HTTP probe on %s, got %+v", cw, name, p)
						continue
					}
					if containerPort(c, p.HTTPGet.Port) == 0 {
						t.Errorf("%s: probe %s port %s is not a container port", cw, name, p.HTTPGet.Port.String())
					}
				}
				if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("%s: liveness on %s", cw, c.LivenessProbe.HTTPGet.Path)
				}
				if repo, tag, _ := strings.Cut(c.Image, ":"); repo == image {
					// No :latest: the release named in components/version.
					if !releaseTag.MatchString(tag) {
						t.Errorf("%s: image %s does not name a release tag vX.Y.Z", cw, c.Image)
					}
					// The probes hit --health-address.
					opts := parseRole(t, cw, c.Args)
					if hp := port(t, opts.health()); containerPort(c, c.LivenessProbe.HTTPGet.Port) != hp || containerPort(c, c.ReadinessProbe.HTTPGet.Port) != hp {
						t.Errorf("%s: probes do not target --health-address %s", cw, opts.health())
					}
					// /healthz fails only once the role is stuck, after its own
					// deadlines (docs/design.md, Operating); the probe only
					// rides out a slow answer from a busy process.
					if lp := c.LivenessProbe; lp.FailureThreshold*lp.PeriodSeconds < 30 || lp.TimeoutSeconds < 5 {
						t.Errorf("%s: liveness probe restarts after %d × %d s with a %d s timeout, want at least 30 s and 5 s",
							cw, lp.FailureThreshold, lp.PeriodSeconds, lp.TimeoutSeconds)
					}
					// Every role serves /metrics over HTTPS on a port of its own,
					// declared for scrapers.
					if mp := containerPort(c, intstr.FromString("metrics")); mp == 0 || mp != port(t, opts.metrics()) {
						t.Errorf("%s: container port metrics %d, --metrics-address %s", cw, mp, opts.metrics())
					}
				} else if c.Image != "registry.k8s.io/kube-scheduler:v1.34.4" {
					t.Errorf("%s: unexpected image %s", cw, c.Image)
				}
			}
		}
	}
}

func mapsSubset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a probe or Service target port (number or name).
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	var n int32
	if _, err := fmt.Sscan(p, &n); err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// roleOptions are a parsed command line of one role.
type roleOptions struct {
	role      string
	args      []string
	publisher *publisher.Options
	webhook   *webhook.Options
	extender  *extender.Options
}

func (r roleOptions) health() string {
	switch {
	case r.publisher != nil:
		return r.publisher.HealthAddress
	case r.webhook != nil:
		return r.webhook.HealthAddress
	default:
		return r.extender.HealthAddress
	}
}

// common returns the flags every role has.
func (r roleOptions) common() cli.Common {
	switch {
	case r.publisher != nil:
		return r.publisher.Common
	case r.webhook != nil:
		return r.webhook.Common
	default:
		return r.extender.Common
	}
}

func (r roleOptions) metrics() string {
	switch {
	case r.publisher != nil:
		return r.publisher.MetricsAddress
	case r.webhook != nil:
		return r.webhook.MetricsAddress
	default:
		return r.extender.MetricsAddress
	}
}

// parseRole parses a container's args (subcommand, then flags) with the
// role's own flag set: an unknown or misspelt flag, a stray argument or an
// invalid value fails the test.
func parseRole(t *testing.T, where string, args []string) roleOptions {
	t.Helper()
	if len(args) == 0 {
		t.Fatalf("%s: no args", where)
	}
	r := roleOptions{role: args[0]}
	fs := pflag.NewFlagSet(args[0], pflag.ContinueOnError)
	var validate func() error
	switch args[0] {
	case "publisher":
		r.publisher = publisher.NewOptions()
		r.publisher.AddFlags(fs)
		validate = r.publisher.Validate
	case "webhook":
		r.webhook = webhook.NewOptions()
		r.webhook.AddFlags(fs)
		validate = r.webhook.Validate
	case "extender":
		r.extender = extender.NewOptions()
		r.extender.AddFlags(fs)
		validate = r.extender.Validate
	default:
		t.Fatalf("%s: args[0] %q is not a kube-reclaim role", where, args[0])
	}
	fs.SetOutput(&bytes.Buffer{})
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("%s: %s flags %q: %v", where, args[0], args[1:], err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("%s: stray arguments %q", where, fs.Args())
	}
	for _, a := range args[1:] {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if f := fs.Lookup(name); !strings.HasPrefix(a, "--") || f == nil || (!hasValue && f.Value.Type() != "bool") {
			t.Errorf("%s: write flags as --name=value (--name for booleans), got %q", where, a)
		}
		if f := fs.Lookup(name); f != nil && f.Deprecated != "" {
			t.Errorf("%s: %q is a deprecated name: %s", where, a, f.Deprecated)
		}
	}
	if err := validate(); err != nil {
		t.Fatalf("%s: %s rejects its flags %q:\n%v", where, args[0], args[1:], err)
	}
	return r
}

// roles parses the kube-reclaim containers of an overlay, by role.
func (b *bundle) roles(t *testing.T) map[string]roleOptions {
	t.Helper()
	out := map[string]roleOptions{}
	for _, d := range b.workloads(t) {
		for _, c := range d.spec.Containers {
			if !strings.HasPrefix(c.Image, image+":") {
				continue
			}
			r := parseRole(t, b.overlay+": "+d.String(), c.Args)
			r.args = c.Args
			// The extender is also the sidecar of kube-reclaim-scheduler.
			own := d.name == "kube-reclaim-"+r.role && d.labels["app.kubernetes.io/component"] == r.role
			sidecar := r.role == "extender" && d.name == "kube-reclaim-scheduler"
			if c.Name != r.role || !(own || sidecar) {
				t.Errorf("%s: %s container %s runs role %s", b.overlay, d, c.Name, r.role)
			}
			if _, dup := out[r.role]; dup {
				t.Errorf("%s: role %s runs in two workloads", b.overlay, r.role)
			}
			out[r.role] = r
		}
	}
	for _, r := range []string{"publisher", "webhook", "extender"} {
		if _, ok := out[r]; !ok {
			t.Fatalf("%s: no workload runs %s", b.overlay, r)
		}
	}
	return out
}

func (b *bundle) deployment(t *testing.T, name string) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	b.get(t, "Deployment", namespace, name, &d)
	return d
}

// mountFor returns the volume mounted at the directory of file.
func mountFor(t *testing.T, d appsv1.Deployment, file string) corev1.Volume {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(file) {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name {
					return v
				}
			}
		}
	}
	t.Fatalf("Deployment %s: nothing mounted at %s", d.Name, path.Dir(file))
	return corev1.Volume{}
}

func TestRoleFlagsAgreeWithTheObjects(t *testing.T) {
	for _, b := range renderAll(t) {
		roles := b.roles(t)
		pub, wh, ext := roles["publisher"].publisher, roles["webhook"].webhook, roles["extender"].extender

		// The publisher reads the policy ConfigMap and elects a leader.
		v := mountFor(t, b.deployment(t, "kube-reclaim-publisher"), pub.ConfigFile)
		var cm corev1.ConfigMap
		if v.ConfigMap == nil {
			t.Fatalf("%s: --config %s is not on a ConfigMap volume", b.overlay, pub.ConfigFile)
		}
		b.get(t, "ConfigMap", namespace, v.ConfigMap.Name, &cm)
		if _, ok := cm.Data[path.Base(pub.ConfigFile)]; !ok {
			t.Errorf("%s: ConfigMap %s has no key %s", b.overlay, cm.Name, path.Base(pub.ConfigFile))
		}
		if pub.ConfigMap != namespace+"/"+cm.Name {
			t.Errorf("%s: --config-map %s, the policy ConfigMap is %s/%s", b.overlay, pub.ConfigMap, namespace, cm.Name)
		}
		// The webhook reads the same file for its profiles.
		if wv := mountFor(t, b.deployment(t, "kube-reclaim-webhook"), wh.ConfigFile); wv.ConfigMap == nil || wv.ConfigMap.Name != v.ConfigMap.Name ||
			path.Base(wh.ConfigFile) != path.Base(pub.ConfigFile) {
			t.Errorf("%s: webhook --config %s is not the publisher's policy file %s on ConfigMap %s", b.overlay, wh.ConfigFile, pub.ConfigFile, v.ConfigMap.Name)
		}
		if le := pub.LeaderElection; !le.LeaderElect || le.ResourceNamespace != namespace {
			t.Errorf("%s: publisher leader election %v in %s", b.overlay, le.LeaderElect, le.ResourceNamespace)
		}
		// Everyone agrees on the lease, the domain and staleness.
		for _, r := range []struct {
			role      string
			ns, name  string
			stale     string
			domain    string
			healthDef string
		}{
			{"webhook", wh.PublisherLeaseNamespace, wh.PublisherLeaseName, wh.StaleAfter.String(), wh.ResourceDomain, ""},
			{"extender", ext.PublisherLeaseNamespace, ext.PublisherLeaseName, ext.StaleAfter.String(), ext.ResourceDomain, ""},
		} {
			if le := pub.LeaderElection; r.ns != le.ResourceNamespace || r.name != le.ResourceName {
				t.Errorf("%s: %s tracks lease %s/%s, the publisher holds %s/%s", b.overlay, r.role, r.ns, r.name, le.ResourceNamespace, le.ResourceName)
			}
			if r.domain != pub.ResourceDomain {
				t.Errorf("%s: %s --resource-domain %s, publisher %s", b.overlay, r.role, r.domain, pub.ResourceDomain)
			}
		}
		// A refresh may wait up to half an interval when many come due at once.
		if wh.StaleAfter != ext.StaleAfter || wh.StaleAfter <= pub.RefreshInterval*3/2 {
			t.Errorf("%s: --stale-after webhook %s extender %s must be equal and above one and a half times the publisher's --refresh-interval %s",
				b.overlay, wh.StaleAfter, ext.StaleAfter, pub.RefreshInterval)
		}

		// The Service reaches the webhook's serving port.
		checkService(t, b, "kube-reclaim-webhook", 443, port(t, wh.ListenAddress))
		// The extender answers only on the loopback it shares with its
		// kube-scheduler, and binds only that scheduler's pods.
		if host, p, err := net.SplitHostPort(ext.ListenAddress); err != nil || host != "127.0.0.1" || "http://"+host+":"+p != extender.DefaultURLPrefix {
			t.Errorf("%s: extender --listen-address %s, want the scheduler configuration's %s", b.overlay, ext.ListenAddress, extender.DefaultURLPrefix)
		}
		if !slices.Contains(roles["extender"].args, "--scheduler-name="+extender.SchedulerName) {
			t.Errorf("%s: extender args %q lack --scheduler-name=%s", b.overlay, roles["extender"].args, extender.SchedulerName)
		}
		// Eviction on measured pressure is the default, and the base
		// grants pods/eviction for it (TestRBACIsLeastPrivilege).
		if pub.Eviction.Mode != eviction.ModeOn {
			t.Errorf("%s: publisher --eviction=%s, want the default, on", b.overlay, pub.Eviction.Mode)
		}

		whd := b.deployment(t, "kube-reclaim-webhook")
		switch b.overlay {
		case "default", ownScheduler:
			if !wh.SelfSigned || wh.WebhookConfigurationName != webhook.DefaultConfigurationName ||
				wh.ServiceName != "kube-reclaim-webhook" || wh.ServiceNamespace != namespace {
				t.Errorf("%s: webhook must run --self-signed for %s and Service %s/%s, got %+v", b.overlay, webhook.DefaultConfigurationName, namespace, "kube-reclaim-webhook", wh)
			}
			// Several replicas need one CA: a Secret every replica may read and
			// update (the exact rules are in TestRBACIsLeastPrivilege).
			if wh.CASecretName == "" || wh.CASecretNamespace != namespace {
				t.Errorf("%s: webhook replicas must share a CA Secret in %s, got --ca-secret-name %q --ca-secret-namespace %q", b.overlay, namespace, wh.CASecretName, wh.CASecretNamespace)
			}
			var role rbacv1.Role
			b.get(t, "Role", namespace, "kube-reclaim-webhook-ca", &role)
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.ResourceNames, []string{wh.CASecretName}) && slices.Contains(r.Verbs, "get") && slices.Contains(r.Verbs, "update")
			}) {
				t.Errorf("%s: Role kube-reclaim-webhook-ca does not cover Secret %s", b.overlay, wh.CASecretName)
			}
		case "cert-manager":
			if wh.SelfSigned || path.Dir(wh.TLSCertFile) != path.Dir(wh.TLSKeyFile) {
				t.Fatalf("cert-manager: webhook TLS flags %q %q self-signed %v", wh.TLSCertFile, wh.TLSKeyFile, wh.SelfSigned)
			}
			tls := mountFor(t, whd, wh.TLSCertFile)
			if tls.Secret == nil || path.Base(wh.TLSCertFile) != "tls.crt" || path.Base(wh.TLSKeyFile) != "tls.key" {
				t.Fatalf("cert-manager: --tls-cert-file %s is not tls.crt of a Secret volume", wh.TLSCertFile)
			}
			var cert struct {
				Spec struct {
					SecretName string   `json:"secretName"`
					DNSNames   []string `json:"dnsNames"`
					IssuerRef  struct {
						Name string `json:"name"`
						Kind string `json:"kind"`
					} `json:"issuerRef"`
				} `json:"spec"`
			}
			o := b.byKey[key("Certificate", namespace, "kube-reclaim-webhook")]
			if o == nil {
				t.Fatal("cert-manager: no Certificate kube-reclaim-webhook")
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cert); err != nil {
				t.Fatal(err)
			}
			if cert.Spec.SecretName != tls.Secret.SecretName {
				t.Errorf("cert-manager: Certificate writes Secret %s, the webhook mounts %s", cert.Spec.SecretName, tls.Secret.SecretName)
			}
			for _, h := range []string{"kube-reclaim-webhook.kube-reclaim.svc", "kube-reclaim-webhook.kube-reclaim.svc.cluster.local"} {
				if !slices.Contains(cert.Spec.DNSNames, h) {
					t.Errorf("cert-manager: Certificate dnsNames %v lack %s", cert.Spec.DNSNames, h)
				}
			}
			if !b.has(cert.Spec.IssuerRef.Kind, namespace, cert.Spec.IssuerRef.Name) {
				t.Errorf("cert-manager: issuer %s %s not rendered", cert.Spec.IssuerRef.Kind, cert.Spec.IssuerRef.Name)
			}
		}
	}
}

func checkService(t *testing.T, b *bundle, name string, svcPort, listen int32) {
	t.Helper()
	var svc corev1.Service
	b.get(t, "Service", namespace, name, &svc)
	d := b.deployment(t, name)
	if !mapsSubset(svc.Spec.Selector, d.Spec.Template.Labels) || len(svc.Spec.Selector) == 0 {
		t.Errorf("%s: Service %s selector %v does not select Deployment %s", b.overlay, name, svc.Spec.Selector, name)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != svcPort {
		t.Fatalf("%s: Service %s ports %+v, want %d", b.overlay, name, svc.Spec.Ports, svcPort)
	}
	if got := containerPort(d.Spec.Template.Spec.Containers[0], svc.Spec.Ports[0].TargetPort); got != listen {
		t.Errorf("%s: Service %s targets container port %d, --listen-address is :%d", b.overlay, name, got, listen)
	}
}

func TestReplicasDisruptionBudgetsAndSpreading(t *testing.T) {
	want := map[string]map[string]int32{
		// --self-signed replicas share their CA through a Secret, so the
		// default overlay runs two webhooks like the cert-manager one.
		// Each scheduler pod has its own extender.
		"default":      {"kube-reclaim-publisher": 2, "kube-reclaim-webhook": 2, "kube-reclaim-scheduler": 2},
		"cert-manager": {"kube-reclaim-publisher": 2, "kube-reclaim-webhook": 2, "kube-reclaim-scheduler": 2},
		// The extender is a DaemonSet beside each control-plane scheduler.
		ownScheduler: {"kube-reclaim-publisher": 2, "kube-reclaim-webhook": 2},
	}
	for _, b := range renderAll(t) {
		pdbs := map[string]policyv1.PodDisruptionBudget{}
		for _, o := range b.kind("PodDisruptionBudget") {
			var p policyv1.PodDisruptionBudget
			decode(t, o, &p)
			pdbs[p.Name] = p
		}
		deps := b.deployments(t)
		if len(deps) != len(want[b.overlay]) {
			t.Errorf("%s: %d Deployments, want %d", b.overlay, len(deps), len(want[b.overlay]))
		}
		for _, d := range deps {
			n := int32(1)
			if d.Spec.Replicas != nil {
				n = *d.Spec.Replicas
			}
			if n != want[b.overlay][d.Name] {
				t.Errorf("%s: Deployment %s has %d replicas, want %d", b.overlay, d.Name, n, want[b.overlay][d.Name])
			}
			pdb, hasPDB := pdbs[d.Name]
			switch {
			case n >= 2:
				if !hasPDB || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil ||
					pdb.Spec.Selector == nil || !mapsSubset(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
					t.Errorf("%s: Deployment %s (%d replicas) needs a PodDisruptionBudget minAvailable 1 selecting it, got %+v", b.overlay, d.Name, n, pdb.Spec)
				}
				spread := d.Spec.Template.Spec.TopologySpreadConstraints
				aff := d.Spec.Template.Spec.Affinity
				if (len(spread) == 0 || spread[0].TopologyKey != "kubernetes.io/hostname" || spread[0].LabelSelector == nil ||
					!mapsSubset(spread[0].LabelSelector.MatchLabels, d.Spec.Template.Labels)) && (aff == nil || aff.PodAntiAffinity == nil) {
					t.Errorf("%s: Deployment %s (%d replicas) is not spread over nodes", b.overlay, d.Name, n)
				}
			default:
				// minAvailable 1 of 1 would block every drain; Recreate keeps
				// two instances (two CAs, two assumption caches) from overlapping.
				if hasPDB {
					t.Errorf("%s: single-replica Deployment %s has a PodDisruptionBudget (it would block drains)", b.overlay, d.Name)
				}
				if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("%s: single-replica Deployment %s strategy %q, want Recreate", b.overlay, d.Name, d.Spec.Strategy.Type)
				}
			}
			delete(pdbs, d.Name)
		}
		for name := range pdbs {
			t.Errorf("%s: PodDisruptionBudget %s matches no Deployment", b.overlay, name)
		}
	}
}

func TestWebhookConfigurationNeverBlocksNodes(t *testing.T) {
	for _, b := range renderAll(t) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		b.get(t, "MutatingWebhookConfiguration", "", webhook.DefaultConfigurationName, &cfg)
		if len(b.kind("MutatingWebhookConfiguration"))+len(b.kind("ValidatingWebhookConfiguration")) != 1 {
			t.Errorf("%s: exactly one webhook configuration expected", b.overlay)
		}
		if len(cfg.Webhooks) != 2 || cfg.Webhooks[0].Name != webhook.WebhookName || cfg.Webhooks[1].Name != webhook.PodWebhookName {
			t.Fatalf("%s: %d webhooks, want %s and %s", b.overlay, len(cfg.Webhooks), webhook.WebhookName, webhook.PodWebhookName)
		}
		// The pod webhook refuses what it cannot process, but only pods its
		// matchCondition selects are ever sent to it.
		pw := cfg.Webhooks[1]
		if pw.FailurePolicy == nil || *pw.FailurePolicy != admissionregistrationv1.Fail || len(pw.MatchConditions) != 1 ||
			pw.ClientConfig.Service == nil || pw.ClientConfig.Service.Path == nil || *pw.ClientConfig.Service.Path != webhook.PodPath ||
			len(pw.ClientConfig.CABundle) != 0 {
			t.Errorf("%s: pod webhook %+v, want failurePolicy Fail, one matchCondition, path %s, empty caBundle", b.overlay, pw, webhook.PodPath)
		}
		w := cfg.Webhooks[0]
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("%s: failurePolicy %v, want Ignore", b.overlay, w.FailurePolicy)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds != 2 {
			t.Errorf("%s: timeoutSeconds %v, want 2", b.overlay, w.TimeoutSeconds)
		}
		if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v, want None", b.overlay, w.SideEffects)
		}
		s := w.ClientConfig.Service
		if s == nil || w.ClientConfig.URL != nil || s.Namespace != namespace || s.Name != "kube-reclaim-webhook" ||
			s.Port == nil || *s.Port != 443 || s.Path == nil || *s.Path != webhook.Path {
			t.Errorf("%s: clientConfig %+v, want Service %s/kube-reclaim-webhook:443%s", b.overlay, w.ClientConfig, namespace, webhook.Path)
		}
		if len(w.ClientConfig.CABundle) != 0 {
			t.Errorf("%s: caBundle must ship empty (filled in the cluster)", b.overlay)
		}
		inject := cfg.Annotations["cert-manager.io/inject-ca-from"]
		switch b.overlay {
		case "default", ownScheduler:
			if inject != "" {
				t.Errorf("%s: cert-manager annotation %q", b.overlay, inject)
			}
		case "cert-manager":
			ns, name, _ := strings.Cut(inject, "/")
			if !b.has("Certificate", ns, name) {
				t.Errorf("cert-manager: inject-ca-from %q names no rendered Certificate", inject)
			}
		}
	}
}

// rule is a PolicyRule written as one comparable line.
func rule(r rbacv1.PolicyRule) string {
	s := func(v []string) string { c := slices.Clone(v); sort.Strings(c); return strings.Join(c, ",") }
	out := "groups=" + s(r.APIGroups) + " resources=" + s(r.Resources) + " verbs=" + s(r.Verbs)
	if len(r.ResourceNames) > 0 {
		out += " names=" + s(r.ResourceNames)
	}
	if len(r.NonResourceURLs) > 0 {
		out += " urls=" + s(r.NonResourceURLs)
	}
	return out
}

func rules(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, rule(r))
	}
	sort.Strings(out)
	return out
}

// delegatedAuth are the rules of every role serving /metrics over HTTPS with
// delegated authentication and authorization.
var delegatedAuth = []string{
	"groups=authentication.k8s.io resources=tokenreviews verbs=create",
	"groups=authorization.k8s.io resources=subjectaccessreviews verbs=create",
}

// The RBAC of every overlay, exactly: the tables of deploy/README.md.
func TestRBACIsLeastPrivilege(t *testing.T) {
	extenderRules := []string{
		"groups= resources=nodes verbs=list,watch",
		"groups= resources=pods verbs=get,list,watch",
		"groups= resources=pods/binding verbs=create",
	}
	common := map[string][]string{
		// pods/eviction: --eviction=on is the default.
		"ClusterRole//kube-reclaim-publisher": append([]string{
			"groups= resources=nodes verbs=get,list,watch",
			"groups= resources=nodes/status verbs=patch",
			"groups= resources=pods verbs=list,watch",
			"groups= resources=pods/eviction verbs=create",
			"groups= resources=events verbs=create,patch",
			"groups=metrics.k8s.io resources=nodes,pods verbs=get,list",
		}, delegatedAuth...),
		"Role/kube-reclaim/kube-reclaim-publisher": {
			"groups=coordination.k8s.io resources=leases verbs=create",
			"groups=coordination.k8s.io resources=leases verbs=get,update names=kube-reclaim-publisher",
		},
		"Role/kube-reclaim/kube-reclaim-webhook": {
			"groups=coordination.k8s.io resources=leases verbs=get,list,watch names=kube-reclaim-publisher",
		},
		"ClusterRole//kube-reclaim-webhook": append([]string{
			"groups= resources=namespaces verbs=list,watch",
			"groups=scheduling.k8s.io resources=priorityclasses verbs=list,watch",
		}, delegatedAuth...),
		// For scrapers; bound by the operator.
		"ClusterRole//kube-reclaim-metrics-reader": {
			"groups= resources= verbs=get urls=/metrics",
		},
		// Asked by the kube-reclaim-node-keys admission policy; bound by
		// the operator to the identities that may set pool and oversell
		// labels.
		"ClusterRole//kube-reclaim-node-label-admin": {
			"groups=kube-reclaim.io resources=nodelabels verbs=update",
		},
	}
	withScheduler := map[string][]string{
		// kube-scheduler and its extender sidecar share one ServiceAccount.
		// Not system:kube-scheduler: no kube-system/kube-scheduler Lease, no
		// pods delete (preemption is off in the profile), no leasecandidates.
		"ClusterRole//kube-reclaim-scheduler": append([]string{
			"groups= resources=nodes verbs=get,list,watch",
			"groups= resources=pods verbs=get,list,watch",
			"groups= resources=pods/binding verbs=create",
			"groups= resources=pods/status verbs=patch,update",
			"groups=,events.k8s.io resources=events verbs=create,patch",
			"groups= resources=replicationcontrollers,services verbs=get,list,watch",
			"groups=apps resources=replicasets,statefulsets verbs=get,list,watch",
			"groups=policy resources=poddisruptionbudgets verbs=get,list,watch",
			"groups= resources=namespaces verbs=get,list,watch",
			"groups= resources=persistentvolumeclaims,persistentvolumes verbs=get,list,patch,update,watch",
			"groups=storage.k8s.io resources=csidrivers,csinodes,csistoragecapacities,storageclasses,volumeattachments verbs=get,list,watch",
			"groups=resource.k8s.io resources=deviceclasses,resourceslices verbs=get,list,watch",
			"groups=resource.k8s.io resources=resourceclaims,resourceclaims/status verbs=get,list,patch,update,watch",
			"groups= resources=pods/finalizers verbs=update",
		}, delegatedAuth...),
		"Role/kube-reclaim/kube-reclaim-scheduler": {
			"groups=coordination.k8s.io resources=leases verbs=create",
			"groups=coordination.k8s.io resources=leases verbs=get,update names=kube-reclaim-scheduler",
			"groups=coordination.k8s.io resources=leases verbs=get,list,watch names=kube-reclaim-publisher",
		},
	}
	selfSigned := map[string][]string{
		// --self-signed: one Get and one Update of its own configuration
		// (the kube-reclaim-webhook-configuration admission policy lets
		// the update change only caBundle).
		"ClusterRole//kube-reclaim-webhook-self-signed": {
			"groups=admissionregistration.k8s.io resources=mutatingwebhookconfigurations verbs=get,update names=kube-reclaim-webhook",
		},
		// The shared CA: get and update that one Secret; create cannot
		// be limited by name.
		"Role/kube-reclaim/kube-reclaim-webhook-ca": {
			"groups= resources=secrets verbs=get,update names=kube-reclaim-webhook-ca",
			"groups= resources=secrets verbs=create",
		},
	}
	// binding -> roleRef kind/name -> subjects (namespace/name of service accounts)
	commonBindings := map[string]string{
		"ClusterRoleBinding//kube-reclaim-publisher":      "ClusterRole/kube-reclaim-publisher -> kube-reclaim/kube-reclaim-publisher",
		"RoleBinding/kube-reclaim/kube-reclaim-publisher": "Role/kube-reclaim-publisher -> kube-reclaim/kube-reclaim-publisher",
		"RoleBinding/kube-reclaim/kube-reclaim-webhook":   "Role/kube-reclaim-webhook -> kube-reclaim/kube-reclaim-webhook",
		"ClusterRoleBinding//kube-reclaim-webhook":        "ClusterRole/kube-reclaim-webhook -> kube-reclaim/kube-reclaim-webhook",
	}
	withSchedulerBindings := map[string]string{
		"ClusterRoleBinding//kube-reclaim-scheduler":                                               "ClusterRole/kube-reclaim-scheduler -> kube-reclaim/kube-reclaim-scheduler",
		"RoleBinding/kube-reclaim/kube-reclaim-scheduler":                                          "Role/kube-reclaim-scheduler -> kube-reclaim/kube-reclaim-scheduler",
		"RoleBinding/kube-system/kube-reclaim-scheduler:extension-apiserver-authentication-reader": "Role/extension-apiserver-authentication-reader -> kube-reclaim/kube-reclaim-scheduler",
	}
	selfSignedBindings := map[string]string{
		"ClusterRoleBinding//kube-reclaim-webhook-self-signed": "ClusterRole/kube-reclaim-webhook-self-signed -> kube-reclaim/kube-reclaim-webhook",
		"RoleBinding/kube-reclaim/kube-reclaim-webhook-ca":     "Role/kube-reclaim-webhook-ca -> kube-reclaim/kube-reclaim-webhook",
	}
	perOverlay := map[string]struct {
		roles    map[string][]string
		bindings map[string]string
	}{
		"default":      {roles: maps(withScheduler, selfSigned), bindings: maps(withSchedulerBindings, selfSignedBindings)},
		"cert-manager": {roles: withScheduler, bindings: withSchedulerBindings},
		ownScheduler: {
			roles: maps(selfSigned, map[string][]string{
				"ClusterRole//kube-reclaim-extender": append(slices.Clone(extenderRules), delegatedAuth...),
				"Role/kube-reclaim/kube-reclaim-extender": {
					"groups=coordination.k8s.io resources=leases verbs=get,list,watch names=kube-reclaim-publisher",
				},
			}),
			bindings: maps(selfSignedBindings, map[string]string{
				"ClusterRoleBinding//kube-reclaim-extender":      "ClusterRole/kube-reclaim-extender -> kube-reclaim-extender/kube-reclaim-extender",
				"RoleBinding/kube-reclaim/kube-reclaim-extender": "Role/kube-reclaim-extender -> kube-reclaim-extender/kube-reclaim-extender",
			}),
		},
	}
	// The extender sidecar may do all that the own-scheduler extender may.
	for _, r := range extenderRules {
		if !covered(r, withScheduler["ClusterRole//kube-reclaim-scheduler"]) {
			t.Errorf("the scheduler ServiceAccount lacks the extender's %s", r)
		}
	}
	for _, b := range renderAll(t) {
		wantRoles := maps(common, perOverlay[b.overlay].roles)
		wantBindings := maps(commonBindings, perOverlay[b.overlay].bindings)
		gotRoles := map[string][]string{}
		gotBindings := map[string]string{}
		for _, o := range b.objs {
			k := key(o.GetKind(), o.GetNamespace(), o.GetName())
			switch o.GetKind() {
			case "ClusterRole", "Role":
				var r rbacv1.ClusterRole // same fields as Role
				decode(t, o, &r)
				if r.AggregationRule != nil {
					t.Errorf("%s: %s aggregates", b.overlay, k)
				}
				for _, pr := range r.Rules {
					for _, f := range [][]string{pr.Verbs, pr.Resources, pr.APIGroups, pr.ResourceNames} {
						if slices.Contains(f, "*") || slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, "*") }) {
							t.Errorf("%s: %s has a wildcard: %s", b.overlay, k, rule(pr))
						}
					}
					for _, v := range pr.Verbs {
						if v == "escalate" || v == "bind" || v == "impersonate" || v == "delete" || v == "deletecollection" {
							t.Errorf("%s: %s grants %s", b.overlay, k, v)
						}
					}
				}
				gotRoles[k] = rules(r.Rules)
			case "ClusterRoleBinding", "RoleBinding":
				var rb rbacv1.RoleBinding // same fields as ClusterRoleBinding
				decode(t, o, &rb)
				var subjects []string
				for _, s := range rb.Subjects {
					if s.Kind != "ServiceAccount" || !b.has("ServiceAccount", s.Namespace, s.Name) {
						t.Errorf("%s: %s binds %+v, not a rendered ServiceAccount", b.overlay, k, s)
					}
					subjects = append(subjects, s.Namespace+"/"+s.Name)
				}
				gotBindings[k] = rb.RoleRef.Kind + "/" + rb.RoleRef.Name + " -> " + strings.Join(subjects, ",")
				if strings.HasPrefix(rb.RoleRef.Name, "system:") {
					t.Errorf("%s: %s binds the built-in %s", b.overlay, k, rb.RoleRef.Name)
				}
				if rb.RoleRef.Name != "extension-apiserver-authentication-reader" {
					ns := ""
					if rb.RoleRef.Kind == "Role" {
						ns = o.GetNamespace()
					}
					if !b.has(rb.RoleRef.Kind, ns, rb.RoleRef.Name) {
						t.Errorf("%s: %s refers to %s %s, not rendered", b.overlay, k, rb.RoleRef.Kind, rb.RoleRef.Name)
					}
				}
			}
		}
		for k, want := range wantRoles {
			w := slices.Clone(want)
			sort.Strings(w)
			if got, ok := gotRoles[k]; !ok {
				t.Errorf("%s: %s missing", b.overlay, k)
			} else if !slices.Equal(got, w) {
				t.Errorf("%s: %s rules\n got: %q\nwant: %q", b.overlay, k, got, w)
			}
			delete(gotRoles, k)
		}
		for k, r := range gotRoles {
			t.Errorf("%s: unexpected %s %q", b.overlay, k, r)
		}
		for k, want := range wantBindings {
			if got := gotBindings[k]; got != want {
				t.Errorf("%s: %s is %q, want %q", b.overlay, k, got, want)
			}
			delete(gotBindings, k)
		}
		for k, r := range gotBindings {
			t.Errorf("%s: unexpected %s %q", b.overlay, k, r)
		}
	}
}

// covered reports whether one of rules (in the form of rule) grants every
// verb of r on its groups and resources.
func covered(r string, rules []string) bool {
	fields := func(s string) map[string][]string {
		out := map[string][]string{}
		for _, f := range strings.Fields(s) {
			k, v, _ := strings.Cut(f, "=")
			out[k] = strings.Split(v, ",")
		}
		return out
	}
	want := fields(r)
	return slices.ContainsFunc(rules, func(s string) bool {
		got := fields(s)
		for _, k := range []string{"groups", "resources", "verbs"} {
			for _, v := range want[k] {
				if !slices.Contains(got[k], v) {
					return false
				}
			}
		}
		return len(got["names"]) == 0
	})
}

func maps[V any](a, b map[string]V) map[string]V {
	out := map[string]V{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestPolicyConfigMapIsValid(t *testing.T) {
	for _, b := range renderAll(t) {
		var cm corev1.ConfigMap
		b.get(t, "ConfigMap", namespace, "kube-reclaim-policy", &cm)
		cfg, warnings, err := policyfile.Parse([]byte(cm.Data["policy.yaml"]))
		if err != nil {
			t.Fatalf("%s: the shipped policy file is rejected: %v", b.overlay, err)
		}
		if len(warnings) > 0 {
			t.Errorf("%s: the shipped policy file loads with warnings: %q", b.overlay, warnings)
		}
		if cfg.Default != policy.DefaultSettings() {
			t.Errorf("%s: the shipped default block %+v differs from the built-in defaults %+v", b.overlay, cfg.Default, policy.DefaultSettings())
		}
		// One label is enough: any opted-in pod gets a profile that sends it
		// to the scheduler with the extender.
		if p := cfg.Profile(map[string]string{"kubernetes.io/metadata.name": "any"}, map[string]string{"kube-reclaim.io/reclaimed": "true"}); p == nil || p.SchedulerName != extender.SchedulerName {
			t.Errorf("%s: the shipped profiles do not send an opted-in pod to %s: %+v", b.overlay, extender.SchedulerName, p)
		}
	}
	// The commented-out example pools are valid once uncommented.
	raw, err := os.ReadFile("base/common/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	uncommented := regexp.MustCompile(`(?m)^# ?(pools:|  .*)$`).ReplaceAll(raw, []byte("$1"))
	cfg, _, err := policyfile.Parse(uncommented)
	if err != nil {
		t.Fatalf("the example pools do not load once uncommented: %v\n%s", err, uncommented)
	}
	if len(cfg.Pools) != 2 {
		t.Errorf("uncommented example has %d pools, want 2:\n%s", len(cfg.Pools), uncommented)
	}
}

func TestSchedulerIsWiredToTheExtender(t *testing.T) {
	for _, b := range renderAll(t) {
		if b.overlay == ownScheduler {
			continue // TestOwnSchedulerExtender
		}
		d := b.deployment(t, "kube-reclaim-scheduler")
		c := d.Spec.Template.Spec.Containers[0]
		var configFile string
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if f, ok := strings.CutPrefix(a, "--config="); ok {
				configFile = f
			}
		}
		v := mountFor(t, d, configFile)
		if v.ConfigMap == nil {
			t.Fatalf("%s: scheduler --config %q is not on a ConfigMap volume", b.overlay, configFile)
		}
		var cm corev1.ConfigMap
		b.get(t, "ConfigMap", namespace, v.ConfigMap.Name, &cm)
		data, ok := cm.Data[path.Base(configFile)]
		if !ok {
			t.Fatalf("%s: ConfigMap %s has no %s", b.overlay, cm.Name, path.Base(configFile))
		}
		want, err := extender.KubeSchedulerConfigYAML(extender.DefaultURLPrefix, reclaimable.DefaultDomain)
		if err != nil {
			t.Fatal(err)
		}
		var got, gen struct {
			LeaderElection struct {
				LeaderElect       bool   `json:"leaderElect"`
				ResourceName      string `json:"resourceName"`
				ResourceNamespace string `json:"resourceNamespace"`
			} `json:"leaderElection"`
			Profiles []struct {
				SchedulerName            string `json:"schedulerName"`
				PercentageOfNodesToScore int32  `json:"percentageOfNodesToScore"`
			} `json:"profiles"`
			Extenders []struct {
				URLPrefix string `json:"urlPrefix"`
			} `json:"extenders"`
		}
		if err := yaml.Unmarshal([]byte(data), &got); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(want), &gen); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(gen) {
			t.Errorf("%s: scheduler configuration %+v, generated %+v", b.overlay, got, gen)
		}
		le := got.LeaderElection
		if !le.LeaderElect || le.ResourceName != "kube-reclaim-scheduler" || le.ResourceNamespace != namespace {
			t.Errorf("%s: leaderElection %+v", b.overlay, le)
		}
		if len(got.Profiles) != 1 || got.Profiles[0].SchedulerName != extender.SchedulerName ||
			got.Profiles[0].PercentageOfNodesToScore != extender.PercentageOfNodesToScore {
			t.Errorf("%s: profiles %+v", b.overlay, got.Profiles)
		}
		// The Role lets its ServiceAccount renew that Lease.
		var role rbacv1.Role
		b.get(t, "Role", le.ResourceNamespace, "kube-reclaim-scheduler", &role)
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.ResourceNames, le.ResourceName) && slices.Contains(r.Verbs, "update")
		}) {
			t.Errorf("%s: Role kube-reclaim-scheduler does not cover Lease %s", b.overlay, le.ResourceName)
		}
		// The extender URL is the sidecar in the same pod, on the loopback.
		if len(got.Extenders) != 1 {
			t.Fatalf("%s: %d extenders", b.overlay, len(got.Extenders))
		}
		u, err := url.Parse(got.Extenders[0].URLPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var sidecar *corev1.Container
		for i, c := range d.Spec.Template.Spec.Containers {
			if len(c.Args) > 0 && c.Args[0] == "extender" {
				sidecar = &d.Spec.Template.Spec.Containers[i]
			}
		}
		if sidecar == nil || len(d.Spec.Template.Spec.Containers) != 2 {
			t.Fatalf("%s: kube-reclaim-scheduler pod has containers %d, want kube-scheduler and the extender", b.overlay, len(d.Spec.Template.Spec.Containers))
		}
		ext := parseRole(t, b.overlay+": extender sidecar", sidecar.Args).extender
		if u.Scheme != "http" || u.Host != ext.ListenAddress || u.Hostname() != "127.0.0.1" {
			t.Errorf("%s: extender URL %s, the sidecar listens on %s; want both on 127.0.0.1", b.overlay, u, ext.ListenAddress)
		}
		// The verbs have no container port: nothing outside the pod uses them.
		for _, cp := range sidecar.Ports {
			if cp.ContainerPort == port(t, ext.ListenAddress) {
				t.Errorf("%s: the extender's loopback port %d is declared as container port %s", b.overlay, cp.ContainerPort, cp.Name)
			}
		}
		if c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS || containerPort(c, c.LivenessProbe.HTTPGet.Port) != 10259 {
			t.Errorf("%s: scheduler probes must use HTTPS on its secure port 10259", b.overlay)
		}
	}
}

// TestReadmePodSpecOptsIn checks the example pod of deploy/README.md.
func TestReadmePodSpecOptsIn(t *testing.T) {
	for _, block := range readmeBlocks(t, "\nkind: Pod\n") {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict([]byte(block), &pod); err != nil {
			t.Fatalf("README pod: %v", err)
		}
		if pod.Spec.SchedulerName != extender.SchedulerName {
			t.Errorf("README pod: schedulerName %q", pod.Spec.SchedulerName)
		}
		names := reclaimable.MustNames(reclaimable.DefaultDomain)
		req, mismatch := names.PodRequest(&pod)
		if mismatch || req.CPUMilli == 0 || req.MemoryBytes == 0 {
			t.Errorf("README pod must request reclaimed cpu and memory with requests == limits: %+v, mismatch %v", req, mismatch)
		}
	}
}

// readmeBlocks returns the ```yaml blocks of deploy/README.md that contain
// marker, dedented.
func readmeBlocks(t *testing.T, marker string) []string {
	t.Helper()
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)\n( *)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		indent, body := m[1], m[2]
		if !strings.Contains(body, marker) {
			continue
		}
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, indent)
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	if len(out) == 0 {
		t.Fatalf("deploy/README.md has no ```yaml block with %q", marker)
	}
	return out
}

// TestOwnSchedulerExtender: deploy/own-scheduler runs the extender beside
// each control-plane kube-scheduler, reachable on the node's loopback only,
// at the URL of the shipped extenders entry the README tells operators to add.
func TestOwnSchedulerExtender(t *testing.T) {
	b := render(t, ownScheduler)
	if b.has("Deployment", namespace, "kube-reclaim-scheduler") {
		t.Error("own-scheduler installs kube-reclaim-scheduler")
	}
	var ds appsv1.DaemonSet
	b.get(t, "DaemonSet", extenderNamespace, "kube-reclaim-extender", &ds)
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(spec.NodeSelector) != 1 {
		t.Errorf("DaemonSet: hostNetwork %v, nodeSelector %v; want the host network of control-plane nodes only", spec.HostNetwork, spec.NodeSelector)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "node-role.kubernetes.io/control-plane" && tl.Operator == corev1.TolerationOpExists && tl.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("DaemonSet tolerations %+v do not tolerate the control-plane taint", spec.Tolerations)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet: %d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	ext := parseRole(t, "own-scheduler DaemonSet", c.Args).extender
	// In the host network every listener is on the node: the verbs and the
	// probes stay on its loopback; kubelet probes there.
	if ext.ListenAddress != "127.0.0.1:8888" || "http://"+ext.ListenAddress != extender.DefaultURLPrefix {
		t.Errorf("--listen-address %s, want 127.0.0.1:8888 (%s)", ext.ListenAddress, extender.DefaultURLPrefix)
	}
	if host, _, _ := net.SplitHostPort(ext.HealthAddress); host != "127.0.0.1" {
		t.Errorf("--health-address %s is not on the loopback", ext.HealthAddress)
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("probe %+v does not target 127.0.0.1", p)
		}
	}
	if !slices.Contains(c.Args, "--scheduler-name="+extender.SchedulerName) {
		t.Errorf("args %q lack --scheduler-name=%s", c.Args, extender.SchedulerName)
	}
	// Host network needs the privileged level: only in its own namespace.
	var ns corev1.Namespace
	b.get(t, "Namespace", "", extenderNamespace, &ns)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s Pod Security labels %v", extenderNamespace, ns.Labels)
	}
	for _, o := range b.objs {
		if o.GetNamespace() == extenderNamespace && o.GetKind() != "DaemonSet" && o.GetKind() != "ServiceAccount" {
			t.Errorf("%s %s in the privileged namespace", o.GetKind(), o.GetName())
		}
	}
	b.get(t, "Namespace", "", namespace, &ns)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s is no longer restricted: %v", namespace, ns.Labels)
	}
}

// TestAdmissionPoliciesAreBoundAndFailClosed checks the shape of the
// shipped ValidatingAdmissionPolicies; what they refuse is tested on a real
// API server (test/integration/admission_policy_test.go).
func TestAdmissionPoliciesAreBoundAndFailClosed(t *testing.T) {
	for _, b := range renderAll(t) {
		if n := len(b.kind("ValidatingAdmissionPolicy")); n != len(admissionPolicies) {
			t.Errorf("%s: %d policies, want %d", b.overlay, n, len(admissionPolicies))
		}
		for _, name := range admissionPolicies {
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			b.get(t, "ValidatingAdmissionPolicy", "", name, &p)
			if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail || len(p.Spec.Validations) == 0 ||
				len(p.Spec.MatchConditions) == 0 || p.Spec.MatchConstraints == nil || p.Spec.ParamKind != nil {
				t.Errorf("%s: policy %s: want failurePolicy Fail, matchConditions, validations, no params: %+v", b.overlay, name, p.Spec)
			}
			var pb admissionregistrationv1.ValidatingAdmissionPolicyBinding
			b.get(t, "ValidatingAdmissionPolicyBinding", "", name, &pb)
			if pb.Spec.PolicyName != name || !slices.Equal(pb.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) ||
				pb.Spec.ParamRef != nil || pb.Spec.MatchResources != nil {
				t.Errorf("%s: binding %s: %+v, want Deny for everything the policy matches", b.overlay, name, pb.Spec)
			}
		}
	}
}

// TestReadmeDefaultSchedulerExtenderMatchesTheShippedOne: the extenders entry
// the README tells operators to add to their own scheduler is the shipped
// one, apart from the URL.
func TestReadmeDefaultSchedulerExtenderMatchesTheShippedOne(t *testing.T) {
	shipped, err := os.ReadFile("scheduler/kube-scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type cfg struct {
		Extenders []map[string]interface{} `json:"extenders"`
		Profiles  []map[string]interface{} `json:"profiles"`
	}
	var want cfg
	if err := yaml.Unmarshal(shipped, &want); err != nil {
		t.Fatal(err)
	}
	for _, block := range readmeBlocks(t, "kind: KubeSchedulerConfiguration") {
		var got cfg
		if err := yaml.Unmarshal([]byte(block), &got); err != nil {
			t.Fatalf("README scheduler configuration: %v", err)
		}
		if len(got.Extenders) != 1 || len(want.Extenders) != 1 {
			t.Fatalf("README has %d extenders, shipped %d", len(got.Extenders), len(want.Extenders))
		}
		if fmt.Sprint(got.Extenders) != fmt.Sprint(want.Extenders) {
			t.Errorf("README extenders entry\n%v\ndiffers from deploy/scheduler's\n%v", got.Extenders, want.Extenders)
		}
		if !slices.ContainsFunc(got.Profiles, func(p map[string]interface{}) bool { return p["schedulerName"] == extender.SchedulerName }) {
			t.Errorf("README scheduler configuration has no %s profile", extender.SchedulerName)
		}
	}
}

// renderWithComponent renders overlay with one more component, as a user's
// kustomization that adds it does.
func renderWithComponent(t *testing.T, overlay, component string) *bundle {
	t.Helper()
	return renderWith(t, overlay, "", component)
}

// renderWith renders overlay with components, in order, and more (YAML
// appended to the kustomization: a user's own patches).
func renderWith(t *testing.T, overlay, more string, components ...string) *bundle {
	t.Helper()
	name := "with-" + strings.Join(components, "-")
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../" + overlay + "\ncomponents:\n"
	for _, c := range components {
		k += "- ../components/" + c + "\n"
	}
	m, err := run(name, map[string]string{name + "/kustomization.yaml": k + more})
	if err != nil {
		t.Fatalf("%s with components %v: %v", overlay, components, err)
	}
	b := &bundle{overlay: overlay + "+" + strings.Join(components, "+"), byKey: map[string]*unstructured.Unstructured{}}
	for _, r := range m.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		b.objs = append(b.objs, o)
		b.byKey[key(o.GetKind(), o.GetNamespace(), o.GetName())] = o
	}
	return b
}

// podMonitor is the part of a monitoring.coreos.com/v1 PodMonitor checked
// here (the operator's Go module is not a dependency).
type podMonitor struct {
	Spec struct {
		ScrapeClass       string `json:"scrapeClass"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port      string `json:"port"`
			Scheme    string `json:"scheme"`
			TLSConfig struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
				CA                 struct {
					Secret    *corev1.SecretKeySelector    `json:"secret"`
					ConfigMap *corev1.ConfigMapKeySelector `json:"configMap"`
				} `json:"ca"`
				ServerName string `json:"serverName"`
			} `json:"tlsConfig"`
			// Authorization and BearerTokenSecret name a Secret: a
			// long-lived token, which the shipped monitors must not use.
			Authorization     map[string]any            `json:"authorization"`
			BearerTokenSecret *corev1.SecretKeySelector `json:"bearerTokenSecret"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// podMonitors decodes the PodMonitors of b.
func (b *bundle) podMonitors(t *testing.T) map[string]podMonitor {
	t.Helper()
	out := map[string]podMonitor{}
	for _, o := range b.kind("PodMonitor") {
		raw, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var pm podMonitor
		if err := json.Unmarshal(raw, &pm); err != nil {
			t.Fatalf("%s: PodMonitor %s: %v", b.overlay, o.GetName(), err)
		}
		out[o.GetNamespace()+"/"+o.GetName()] = pm
	}
	return out
}

// certificate is a cert-manager.io/v1 Certificate or Issuer, with the
// fields the shipped ones use (decoded strictly: a misspelt field fails).
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		IsCA        bool           `json:"isCA"`
		CommonName  string         `json:"commonName"`
		SecretName  string         `json:"secretName"`
		DNSNames    []string       `json:"dnsNames"`
		Duration    string         `json:"duration"`
		RenewBefore string         `json:"renewBefore"`
		PrivateKey  map[string]any `json:"privateKey"`
		Usages      []string       `json:"usages"`
		IssuerRef   struct {
			Group string `json:"group"`
			Kind  string `json:"kind"`
			Name  string `json:"name"`
		} `json:"issuerRef"`
		// An Issuer's.
		CA *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
		SelfSigned *struct{} `json:"selfSigned"`
	} `json:"spec"`
}

// The scrape the shipped PodMonitors configure, which deploy/README.md
// (Monitoring) tells a Prometheus administrator to match.
const (
	metricsTLSSecret   = "kube-reclaim-metrics-tls"
	metricsServerName  = "kube-reclaim-metrics.kube-reclaim.svc"
	metricsAudience    = "kube-reclaim-metrics"
	metricsScrapeClass = "kube-reclaim"
)

// TestMonitoringComponent: with components/monitoring, every role's metrics
// port is scraped over HTTPS by exactly one PodMonitor that verifies the
// role's certificate (a CA from a Secret and the name the certificate is
// issued for, never insecureSkipVerify) and names no token Secret (the
// scrape class sends Prometheus' projected token); every container serving
// metrics serves that certificate and accepts only tokens for the metrics
// audience; the scraper binding grants get on /metrics and nothing more;
// the PrometheusRule's alerts each have a runbook section; the dashboards
// ConfigMap carries the Grafana sidecar label and valid JSON. What the rules
// and dashboards query is checked against the live roles in
// test/integration/monitoring_test.go.
func TestMonitoringComponent(t *testing.T) {
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, overlay := range extenderOverlays() {
		b := renderWithComponent(t, overlay, "monitoring")

		// The certificate the monitors verify: a CA Issuer's, for the
		// serverName, into the Secret they read the CA from.
		var cert, ca certificate
		var issuer certificate
		b.get(t, "Certificate", namespace, "kube-reclaim-metrics", &cert)
		b.get(t, "Issuer", namespace, cert.Spec.IssuerRef.Name, &issuer)
		if cert.Spec.SecretName != metricsTLSSecret || !slices.Equal(cert.Spec.DNSNames, []string{metricsServerName}) ||
			cert.Spec.IssuerRef.Kind != "Issuer" || issuer.Spec.CA == nil {
			t.Errorf("%s: metrics Certificate %+v issued by %+v, want %s for %s from a CA Issuer", b.overlay, cert.Spec, issuer.Spec, metricsTLSSecret, metricsServerName)
		} else {
			var caCerts []certificate
			for _, o := range b.kind("Certificate") {
				var c certificate
				b.get(t, "Certificate", o.GetNamespace(), o.GetName(), &c)
				if c.Spec.SecretName == issuer.Spec.CA.SecretName {
					caCerts = append(caCerts, c)
				}
			}
			if len(caCerts) != 1 || !caCerts[0].Spec.IsCA {
				t.Errorf("%s: the CA Issuer's Secret %s is made by %d Certificates %+v, want one CA", b.overlay, issuer.Spec.CA.SecretName, len(caCerts), caCerts)
			} else {
				ca = caCerts[0]
				if ca.Spec.SecretName == "kube-reclaim-ca" {
					t.Errorf("%s: the metrics CA is the webhook's", b.overlay)
				}
			}
		}

		monitors := b.podMonitors(t)
		for name, pm := range monitors {
			if !strings.HasPrefix(name, namespace+"/") {
				t.Errorf("%s: PodMonitor %s: the CA Secret it reads is in %s", b.overlay, name, namespace)
			}
			if pm.Spec.ScrapeClass != metricsScrapeClass {
				t.Errorf("%s: PodMonitor %s scrape class %q, want %q (the one that sends the projected token)", b.overlay, name, pm.Spec.ScrapeClass, metricsScrapeClass)
			}
			for _, ep := range pm.Spec.PodMetricsEndpoints {
				tc := ep.TLSConfig
				if ep.Port != "metrics" || ep.Scheme != "https" || tc.InsecureSkipVerify || tc.CA.Secret == nil ||
					tc.CA.Secret.Name != metricsTLSSecret || tc.CA.Secret.Key != "ca.crt" || tc.ServerName != metricsServerName {
					t.Errorf("%s: PodMonitor %s endpoint %+v, want port metrics over HTTPS verified by %s ca.crt as %s", b.overlay, name, ep, metricsTLSSecret, metricsServerName)
				}
				if ep.Authorization != nil || ep.BearerTokenSecret != nil {
					t.Errorf("%s: PodMonitor %s sends a token from a Secret: %v %v", b.overlay, name, ep.Authorization, ep.BearerTokenSecret)
				}
			}
		}
		// Every container port named metrics is scraped once, serves the
		// certificate the monitors verify, and accepts only tokens issued
		// for the metrics audience.
		scraped := 0
		for _, w := range b.workloads(t) {
			for _, c := range w.spec.Containers {
				if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
					continue
				}
				scraped++
				n := 0
				for _, pm := range monitors {
					sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
					if err != nil {
						t.Fatal(err)
					}
					if slices.Contains(pm.Spec.NamespaceSelector.MatchNames, w.namespace) && sel.Matches(labels.Set(w.labels)) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: %s is scraped by %d PodMonitors, want 1", b.overlay, w, n)
				}
				common := parseRole(t, b.overlay+": "+w.String(), c.Args).common()
				if !slices.Equal(common.MetricsTokenAudiences, []string{metricsAudience}) {
					t.Errorf("%s: %s container %s accepts tokens for %q, want %q only", b.overlay, w, c.Name, common.MetricsTokenAudiences, metricsAudience)
				}
				dir := path.Dir(common.MetricsTLSCertFile)
				if common.MetricsTLSCertFile == "" || path.Dir(common.MetricsTLSKeyFile) != dir {
					t.Errorf("%s: %s container %s serves metrics with %q %q, want files of one directory", b.overlay, w, c.Name, common.MetricsTLSCertFile, common.MetricsTLSKeyFile)
					continue
				}
				var secret string
				for _, m := range c.VolumeMounts {
					for _, v := range w.spec.Volumes {
						if m.MountPath == dir && v.Name == m.Name && v.Secret != nil {
							secret = v.Secret.SecretName
						}
					}
				}
				if secret != metricsTLSSecret {
					t.Errorf("%s: %s container %s mounts Secret %q at %s, want %s", b.overlay, w, c.Name, secret, dir, metricsTLSSecret)
				}
				// cert-manager writes the Secret in the Certificate's
				// namespace only: the extender DaemonSet of own-scheduler
				// needs a copy (deploy/README.md, Monitoring).
				if w.namespace != namespace && !(overlay == ownScheduler && w.namespace == extenderNamespace) {
					t.Errorf("%s: %s in %s mounts %s, which is made in %s only", b.overlay, w, w.namespace, metricsTLSSecret, namespace)
				}
			}
		}
		if scraped < 3 {
			t.Errorf("%s: %d containers serve metrics, want every role's", b.overlay, scraped)
		}

		// The scrapers: Prometheus' own ServiceAccount, bound to get on
		// /metrics; no legacy token Secret anywhere.
		var crb rbacv1.ClusterRoleBinding
		b.get(t, "ClusterRoleBinding", "", "kube-reclaim-metrics-scraper", &crb)
		if crb.RoleRef.Name != "kube-reclaim-metrics-reader" || len(crb.Subjects) != 1 || crb.Subjects[0].Kind != rbacv1.ServiceAccountKind ||
			crb.Subjects[0].Name != "prometheus-k8s" || crb.Subjects[0].Namespace != "monitoring" {
			t.Errorf("%s: scraper binding %+v, want kube-prometheus's Prometheus ServiceAccount monitoring/prometheus-k8s", b.overlay, crb)
		}
		var reader rbacv1.ClusterRole
		b.get(t, "ClusterRole", "", crb.RoleRef.Name, &reader)
		if got := rules(reader.Rules); !slices.Equal(got, []string{"groups= resources= verbs=get urls=/metrics"}) {
			t.Errorf("%s: the scraper may do %q, want get on /metrics only", b.overlay, got)
		}
		for _, o := range b.kind("Secret") {
			if typ, _, _ := unstructured.NestedString(o.Object, "type"); typ == string(corev1.SecretTypeServiceAccountToken) {
				t.Errorf("%s: Secret %s/%s is a legacy service account token", b.overlay, o.GetNamespace(), o.GetName())
			}
		}

		rule, ok := b.byKey[key("PrometheusRule", namespace, "kube-reclaim")]
		if !ok {
			t.Fatalf("%s: no PrometheusRule", b.overlay)
		}
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		alerts := 0
		for _, g := range groups {
			rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rs {
				r := r.(map[string]any)
				name, _ := r["alert"].(string)
				if name == "" {
					continue
				}
				alerts++
				url, _, _ := unstructured.NestedString(r, "annotations", "runbook_url")
				anchor := strings.ToLower(name)
				if !strings.HasSuffix(url, "docs/runbook.md#"+anchor) || !bytes.Contains(runbook, []byte("\n## "+name+"\n")) {
					t.Errorf("%s: alert %s: runbook_url %q, want docs/runbook.md#%s and a section \"## %s\" there", b.overlay, name, url, anchor, name)
				}
			}
		}
		if alerts == 0 {
			t.Errorf("%s: the PrometheusRule has no alert", b.overlay)
		}

		var cm corev1.ConfigMap
		b.get(t, "ConfigMap", namespace, "kube-reclaim-dashboards", &cm)
		if cm.Labels["grafana_dashboard"] != "1" || len(cm.Data) != 2 {
			t.Errorf("%s: dashboards ConfigMap labels %v with %d files, want grafana_dashboard=1 and 2", b.overlay, cm.Labels, len(cm.Data))
		}
		for f, d := range cm.Data {
			if !json.Valid([]byte(d)) {
				t.Errorf("%s: dashboard %s is not JSON", b.overlay, f)
			}
		}
	}
	// Positive controls: the overlays alone scrape nothing and serve the
	// self-signed certificate, with tokens for the API server's audiences.
	b := render(t, "default")
	if n := len(b.kind("PodMonitor")); n != 0 {
		t.Errorf("default: %d PodMonitors without components/monitoring", n)
	}
	for role, r := range b.roles(t) {
		if c := r.common(); c.MetricsTLSCertFile != "" || len(c.MetricsTokenAudiences) != 0 {
			t.Errorf("default: %s serves metrics with %q for audiences %q without components/monitoring", role, c.MetricsTLSCertFile, c.MetricsTokenAudiences)
		}
	}
}

// TestKubePrometheusStackComponent: components/kube-prometheus-stack after
// components/monitoring puts the label the chart's Prometheus selects
// monitors and rules by on every PodMonitor and the PrometheusRule, keeps
// the Grafana sidecar's label on the dashboards, and binds the chart's
// Prometheus ServiceAccount; a user's own release name, set the way
// deploy/README.md says, replaces it everywhere.
func TestKubePrometheusStackComponent(t *testing.T) {
	const userRelease = `patches:
  - target: {group: monitoring.coreos.com, kind: PodMonitor|PrometheusRule}
    patch: |-
      - op: replace
        path: /metadata/labels/release
        value: prom
  - target: {kind: ClusterRoleBinding, name: kube-reclaim-metrics-scraper}
    patch: |-
      - op: replace
        path: /subjects/0/name
        value: prom-kube-prometheus-stack-prometheus
`
	for _, overlay := range extenderOverlays() {
		for _, tc := range []struct {
			more, release, serviceAccount string
		}{
			{release: "kube-prometheus-stack", serviceAccount: "kube-prometheus-stack-prometheus"},
			{more: userRelease, release: "prom", serviceAccount: "prom-kube-prometheus-stack-prometheus"},
		} {
			b := renderWith(t, overlay, tc.more, "monitoring", "kube-prometheus-stack")
			selected := 0
			for _, kind := range []string{"PodMonitor", "PrometheusRule"} {
				objs := b.kind(kind)
				if len(objs) == 0 {
					t.Errorf("%s: no %s", b.overlay, kind)
				}
				for _, o := range objs {
					if got := o.GetLabels()["release"]; got != tc.release {
						t.Errorf("%s: %s %s has release=%q, want %q", b.overlay, kind, o.GetName(), got, tc.release)
					} else {
						selected++
					}
				}
			}
			if selected < 4 {
				t.Errorf("%s: %d monitors and rules carry the release label, want the 3 PodMonitors and the PrometheusRule", b.overlay, selected)
			}
			var cm corev1.ConfigMap
			b.get(t, "ConfigMap", namespace, "kube-reclaim-dashboards", &cm)
			if cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("%s: dashboards ConfigMap labels %v, want grafana_dashboard=1", b.overlay, cm.Labels)
			}
			var crb rbacv1.ClusterRoleBinding
			b.get(t, "ClusterRoleBinding", "", "kube-reclaim-metrics-scraper", &crb)
			if len(crb.Subjects) != 1 || crb.Subjects[0].Name != tc.serviceAccount || crb.Subjects[0].Namespace != "monitoring" {
				t.Errorf("%s: scraper binding subjects %+v, want monitoring/%s", b.overlay, crb.Subjects, tc.serviceAccount)
			}
			// Nothing else changes: the workloads and the monitors'
			// verification are those of components/monitoring alone.
			alone := renderWithComponent(t, overlay, "monitoring")
			for k, o := range alone.byKey {
				if o.GetKind() == "PodMonitor" || o.GetKind() == "PrometheusRule" || k == key("ClusterRoleBinding", "", "kube-reclaim-metrics-scraper") {
					continue
				}
				if got, ok := b.byKey[k]; !ok || !equalObjects(got, o) {
					t.Errorf("%s: %s differs from components/monitoring alone", b.overlay, k)
				}
			}
		}
	}
	// Positive control: components/monitoring alone labels nothing for a release.
	for _, o := range renderWithComponent(t, "default", "monitoring").objs {
		if _, ok := o.GetLabels()["release"]; ok {
			t.Errorf("default+monitoring: %s %s has a release label", o.GetKind(), o.GetName())
		}
	}
}

// equalObjects compares two rendered objects.
func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, errA := a.MarshalJSON()
	jb, errB := b.MarshalJSON()
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// TestEveryGoContainerHasASoftMemoryLimitBelowItsMemoryLimit: every
// container of every overlay (kube-scheduler too: a Go binary) gets the Go
// runtime's soft memory limit from its own memory limit through the
// downward API, as the kubelet resolves it (resourceFieldRef rounded up to
// the divisor, then $(VAR) expanded): GOMEMLIMIT in bytes, or
// KUBE_RECLAIM_MEMORY_LIMIT, of which kube-reclaim sets
// cli.MemoryLimitFraction. The result is below the limit with room for what
// the Go runtime does not count.
func TestEveryGoContainerHasASoftMemoryLimitBelowItsMemoryLimit(t *testing.T) {
	for _, b := range renderAll(t) {
		for _, w := range b.workloads(t) {
			for _, c := range w.spec.Containers {
				limit := c.Resources.Limits.Memory()
				if limit.IsZero() {
					t.Errorf("%s: %s container %s has no memory limit", b.overlay, w, c.Name)
					continue
				}
				resolved := map[string]string{}
				for _, e := range c.Env {
					v := e.Value
					if f := e.ValueFrom; f != nil && f.ResourceFieldRef != nil {
						r := f.ResourceFieldRef
						if r.Resource != "limits.memory" || (r.ContainerName != "" && r.ContainerName != c.Name) {
							t.Errorf("%s: %s container %s: %s from %+v, want its own limits.memory", b.overlay, w, c.Name, e.Name, r)
							continue
						}
						divisor := r.Divisor.Value()
						if divisor == 0 {
							divisor = 1
						}
						v = strconv.FormatInt((limit.Value()+divisor-1)/divisor, 10)
					}
					for name, val := range resolved {
						v = strings.ReplaceAll(v, "$("+name+")", val)
					}
					resolved[e.Name] = v
				}
				var soft float64
				switch gomemlimit, ours := resolved["GOMEMLIMIT"], resolved[cli.MemoryLimitEnv]; {
				case gomemlimit != "":
					// Bytes, as Go reads a number without a unit.
					n, err := strconv.ParseInt(gomemlimit, 10, 64)
					if err != nil {
						t.Errorf("%s: %s container %s: GOMEMLIMIT %q is not a count of bytes: %v", b.overlay, w, c.Name, gomemlimit, err)
						continue
					}
					soft = float64(n)
				case ours != "" && strings.HasPrefix(c.Image, image):
					n, err := strconv.ParseInt(ours, 10, 64)
					if err != nil {
						t.Errorf("%s: %s container %s: %s %q: %v", b.overlay, w, c.Name, cli.MemoryLimitEnv, ours, err)
						continue
					}
					soft = float64(n) * cli.MemoryLimitFraction
				default:
					t.Errorf("%s: %s container %s (%s) has no soft memory limit: env %v", b.overlay, w, c.Name, c.Image, resolved)
					continue
				}
				if ratio := soft / float64(limit.Value()); ratio < 0.75 || ratio > 0.96 {
					t.Errorf("%s: %s container %s: soft memory limit %.0f is %.3f of the memory limit %s, want 0.75 to 0.96", b.overlay, w, c.Name, soft, ratio, limit)
				}
			}
		}
	}
}

// TestNodeIsolationComponent: with components/node-isolation the publisher,
// the webhook and kube-reclaim-scheduler run on control-plane nodes only:
// they select the control-plane label and tolerate its taint, which no other
// taint of a node lets them past.
func TestNodeIsolationComponent(t *testing.T) {
	controlPlane := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	others := []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	tolerates := func(spec corev1.PodSpec, taint corev1.Taint) bool {
		return slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(&taint) })
	}
	for _, overlay := range Overlays {
		b := renderWithComponent(t, overlay, "node-isolation")
		pinned := 0
		for _, w := range b.workloads(t) {
			if !slices.Equal(slices.Sorted(mapKeys(w.spec.NodeSelector)), []string{"node-role.kubernetes.io/control-plane"}) ||
				!tolerates(w.spec, controlPlane) {
				t.Errorf("%s: %s: nodeSelector %v, tolerations %+v, want the control-plane nodes", b.overlay, w, w.spec.NodeSelector, w.spec.Tolerations)
			}
			for _, taint := range others {
				if tolerates(w.spec, taint) {
					t.Errorf("%s: %s tolerates %s", b.overlay, w, taint.ToString())
				}
			}
			pinned++
		}
		// The publisher, the webhook, and kube-reclaim-scheduler or
		// own-scheduler's extender DaemonSet.
		if want := 3; pinned != want {
			t.Errorf("%s: %d workloads pinned, want %d", b.overlay, pinned, want)
		}
	}
	// Positive control: without the component the Deployments may run on
	// any node.
	for _, w := range render(t, "default").workloads(t) {
		if len(w.spec.NodeSelector) != 0 || tolerates(w.spec, controlPlane) {
			t.Errorf("default: %s is pinned without components/node-isolation", w)
		}
	}
}

func mapKeys(m map[string]string) iter.Seq[string] { return goMaps.Keys(m) }

// TestNetworkPolicyComponent evaluates the rendered NetworkPolicies for every
// container port of every kube-reclaim pod: metrics only from the monitoring
// namespace, the webhook's admission port from anywhere (the API server),
// and nothing else from any pod (the probes come from the node, which
// NetworkPolicy always lets through).
func TestNetworkPolicyComponent(t *testing.T) {
	for _, overlay := range Overlays {
		b := renderWithComponent(t, overlay, "network-policy")
		var policies []networkingv1.NetworkPolicy
		for _, o := range b.kind("NetworkPolicy") {
			var np networkingv1.NetworkPolicy
			decode(t, o, &np)
			policies = append(policies, np)
		}
		for _, w := range b.workloads(t) {
			if w.spec.HostNetwork {
				// NetworkPolicy does not apply; own-scheduler's extender
				// keeps its verbs and probes on 127.0.0.1.
				continue
			}
			isolated := false
			for _, c := range w.spec.Containers {
				for _, port := range c.Ports {
					var from []string
					for _, np := range policies {
						sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
						if err != nil {
							t.Fatal(err)
						}
						if np.Namespace != w.namespace || !sel.Matches(labels.Set(w.labels)) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
							continue
						}
						isolated = true
						for _, rule := range np.Spec.Ingress {
							if !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool { return portMatches(p, port) }) && len(rule.Ports) != 0 {
								continue
							}
							if len(rule.From) == 0 {
								from = append(from, "anywhere")
							}
							for _, peer := range rule.From {
								from = append(from, peerString(peer))
							}
						}
					}
					want := []string(nil)
					switch {
					case port.Name == "metrics":
						want = []string{"namespace kubernetes.io/metadata.name=monitoring"}
					case w.labels["app.kubernetes.io/component"] == "webhook" && port.Name == "https":
						want = []string{"anywhere"}
					}
					if !slices.Equal(from, want) {
						t.Errorf("%s: %s container %s port %s (%d) reachable from %q, want %q", b.overlay, w, c.Name, port.Name, port.ContainerPort, from, want)
					}
				}
			}
			if !isolated {
				t.Errorf("%s: no NetworkPolicy selects %s", b.overlay, w)
			}
		}
	}
	// Positive control: the overlays alone isolate nothing.
	if n := len(render(t, "default").kind("NetworkPolicy")); n != 0 {
		t.Errorf("default: %d NetworkPolicies without components/network-policy", n)
	}
}

func portMatches(p networkingv1.NetworkPolicyPort, c corev1.ContainerPort) bool {
	if p.Protocol != nil && *p.Protocol != c.Protocol && !(*p.Protocol == corev1.ProtocolTCP && c.Protocol == "") {
		return false
	}
	if p.Port == nil {
		return true
	}
	if p.Port.Type == intstr.String {
		return p.Port.StrVal == c.Name
	}
	return p.Port.IntVal == c.ContainerPort
}

func peerString(p networkingv1.NetworkPolicyPeer) string {
	switch {
	case p.IPBlock != nil:
		return "ipBlock " + p.IPBlock.CIDR
	case p.PodSelector != nil:
		return "pods " + metav1.FormatLabelSelector(p.PodSelector) + " in namespaces " + metav1.FormatLabelSelector(p.NamespaceSelector)
	case p.NamespaceSelector != nil:
		return "namespace " + metav1.FormatLabelSelector(p.NamespaceSelector)
	}
	return "?"
}

// TestOwnObjectsPolicyNamesWhatTheRolesCreate: the Lease and Secret names
// the admission policy kube-reclaim-own-objects lets each account create are
// those the roles' flags and kube-scheduler's configuration (checked
// against kube-reclaim-scheduler above) name, or the roles could not create
// them.
func TestOwnObjectsPolicyNamesWhatTheRolesCreate(t *testing.T) {
	for _, b := range renderAll(t) {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		b.get(t, "ValidatingAdmissionPolicy", "", "kube-reclaim-own-objects", &p)
		var own string
		for _, v := range p.Spec.Variables {
			if v.Name == "own" {
				own = v.Expression
			}
		}
		roles := b.roles(t)
		pub, wh := roles["publisher"].publisher, roles["webhook"].webhook
		want := []string{
			"'system:serviceaccount:" + namespace + ":kube-reclaim-publisher' ? 'leases " + pub.LeaderElection.ResourceNamespace + "/" + pub.LeaderElection.ResourceName + "'",
			"'system:serviceaccount:" + namespace + ":kube-reclaim-scheduler' ? 'leases " + namespace + "/kube-reclaim-scheduler'",
		}
		if wh.CASecretName != "" {
			want = append(want, ": 'secrets "+wh.CASecretNamespace+"/"+wh.CASecretName+"'")
		}
		for _, w := range want {
			if !strings.Contains(own, w) {
				t.Errorf("%s: kube-reclaim-own-objects does not allow %s\n(its own: %s)", b.overlay, w, own)
			}
		}
	}
}

// TestMonitoringComponentWithoutCertManager: the patch deploy/README.md
// gives for a metrics Secret made without cert-manager removes the
// cert-manager objects of components/monitoring and nothing else.
func TestMonitoringComponentWithoutCertManager(t *testing.T) {
	const noCertManager = `patches:
  - target: {group: cert-manager.io, kind: Issuer|Certificate, name: kube-reclaim-metrics.*}
    patch: |-
      $patch: delete
      apiVersion: cert-manager.io/v1
      kind: Issuer
      metadata:
        name: any
`
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	indented := strings.ReplaceAll(noCertManager, "\n", "\n  ")
	if !bytes.Contains(readme, []byte(strings.TrimSuffix(indented, "  "))) {
		t.Errorf("deploy/README.md does not give the patch tested here:\n%s", noCertManager)
	}
	for _, overlay := range extenderOverlays() {
		with := renderWithComponent(t, overlay, "monitoring")
		without := renderWith(t, overlay, noCertManager, "monitoring")
		removed := 0
		for k, o := range with.byKey {
			_, kept := without.byKey[k]
			isMetricsCertManager := o.GetAPIVersion() == "cert-manager.io/v1" && strings.HasPrefix(o.GetName(), "kube-reclaim-metrics")
			switch {
			case isMetricsCertManager && kept:
				t.Errorf("%s: %s is still there", without.overlay, k)
			case isMetricsCertManager:
				removed++
			case !kept || !equalObjects(without.byKey[k], o):
				t.Errorf("%s: %s was removed or changed", without.overlay, k)
			}
		}
		// Positive control: there were the CA's Issuers and Certificates
		// and the serving Certificate to remove.
		if removed != 4 {
			t.Errorf("%s: %d metrics cert-manager objects removed, want 4", without.overlay, removed)
		}
	}
}

// deploy/plugin-scheduler is deploy/default with one difference: the
// scheduler pod runs kube-reclaim-scheduler (the placement plugin compiled
// into kube-scheduler) from the kube-reclaim image, alone, with the plugin's
// configuration. Every other object is default's, which the tables above
// check.
func TestPluginSchedulerOverlay(t *testing.T) {
	def, plug := render(t, "default"), render(t, pluginScheduler)
	const cfgMap = "kube-reclaim-scheduler-config"
	isConfig := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), cfgMap+"-")
	}
	isScheduler := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Deployment" && o.GetName() == "kube-reclaim-scheduler"
	}
	others := func(b *bundle) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range b.objs {
			if !isConfig(o) && !isScheduler(o) {
				out[key(o.GetKind(), o.GetNamespace(), o.GetName())] = o
			}
		}
		return out
	}
	d, p := others(def), others(plug)
	for k, o := range d {
		if q, ok := p[k]; !ok {
			t.Errorf("plugin-scheduler lacks %s", k)
		} else if !reflect.DeepEqual(o.Object, q.Object) {
			t.Errorf("plugin-scheduler's %s differs from default's", k)
		}
	}
	for k := range p {
		if _, ok := d[k]; !ok {
			t.Errorf("plugin-scheduler adds %s", k)
		}
	}
	// Positive control: the comparison sees the objects of both.
	if len(d) < 10 || len(d) != len(p) {
		t.Errorf("compared %d objects of default with %d of plugin-scheduler", len(d), len(p))
	}

	dep := plug.deployment(t, "kube-reclaim-scheduler")
	cs := dep.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the scheduler pod runs %d containers, want kube-reclaim-scheduler alone (no extender sidecar)", len(cs))
	}
	c := cs[0]
	repo, tag, _ := strings.Cut(c.Image, ":")
	if repo != image || !releaseTag.MatchString(tag) || len(c.Command) == 0 || c.Command[0] != "kube-reclaim-scheduler" {
		t.Errorf("scheduler container: image %s command %q, want kube-reclaim-scheduler from %s:vX.Y.Z", c.Image, c.Command, image)
	}
	if def.deployment(t, "kube-reclaim-scheduler").Spec.Template.Spec.Containers[0].Image == c.Image {
		t.Errorf("the default overlay's kube-scheduler image is %s too: the plugin scheduler is not in it", c.Image)
	}
	v := mountFor(t, dep, strings.TrimPrefix(c.Command[1], "--config="))
	if v.ConfigMap == nil || !strings.HasPrefix(v.ConfigMap.Name, cfgMap+"-") {
		t.Fatalf("--config is not on the scheduler's ConfigMap: %+v", v)
	}
	var cm corev1.ConfigMap
	plug.get(t, "ConfigMap", namespace, v.ConfigMap.Name, &cm)
	var cfg struct {
		LeaderElection map[string]any `json:"leaderElection"`
		Profiles       []struct {
			SchedulerName string `json:"schedulerName"`
			Plugins       map[string]struct {
				Enabled []struct {
					Name string `json:"name"`
				} `json:"enabled"`
			} `json:"plugins"`
		} `json:"profiles"`
		Extenders []any `json:"extenders"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["kube-scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != extender.SchedulerName || len(cfg.Extenders) != 0 {
		t.Fatalf("configuration: profiles %+v, extenders %v; want the one profile %s and no extender", cfg.Profiles, cfg.Extenders, extender.SchedulerName)
	}
	for _, point := range []string{"preFilter", "filter", "score", "reserve"} {
		if en := cfg.Profiles[0].Plugins[point].Enabled; len(en) != 1 || en[0].Name != "KubeReclaim" {
			t.Errorf("extension point %s enables %+v, want KubeReclaim", point, en)
		}
	}
	if cfg.LeaderElection["resourceName"] != "kube-reclaim-scheduler" || cfg.LeaderElection["resourceNamespace"] != namespace {
		t.Errorf("leader election %v, want the lease kube-reclaim/kube-reclaim-scheduler the scheduler's Role allows", cfg.LeaderElection)
	}
}
