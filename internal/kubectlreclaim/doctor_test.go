package kubectlreclaim

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	versioninfo "k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// install is a fake cluster holding an install of one overlay.
type install struct {
	objects    []runtime.Object
	apiService *unstructured.Unstructured
	metrics    []metricsv1beta1.NodeMetrics
	version    string
	// forbidden are the resources (e.g. "endpointslices") the caller may
	// not list.
	forbidden []string
	// policyAPI makes discovery list ValidatingAdmissionPolicies.
	policyAPI bool
}

// testCA is a CA and the certificate it issued for the webhook Service.
type testCA struct {
	caPEM, leafPEM []byte
}

func newTestCA(t *testing.T, dnsName string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(der []byte) []byte {
		b, err := certutil.EncodeCertificates(mustParse(t, der))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return testCA{caPEM: enc(der), leafPEM: enc(leafDER)}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// healthyInstall is overlay as it runs when all is well: every object of
// the manifests in place, the webhook's caBundle from ca, every pod
// available, the publisher leading and two nodes freshly annotated.
func healthyInstall(t *testing.T, overlay string, ca testCA) install {
	t.Helper()
	m, err := loadManifests(overlay, "", testNames)
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for i := range m.policies {
		objs = append(objs, m.policies[i].DeepCopy())
	}
	for i := range m.bindings {
		objs = append(objs, m.bindings[i].DeepCopy())
	}
	for i := range m.webhooks {
		w := m.webhooks[i].DeepCopy()
		for j := range w.Webhooks {
			w.Webhooks[j].ClientConfig.CABundle = ca.caPEM
		}
		objs = append(objs, w)
	}
	for i := range m.deployments {
		d := m.deployments[i].DeepCopy()
		d.Status.AvailableReplicas = replicas(d)
		objs = append(objs, d)
	}
	for i := range m.daemonSets {
		d := m.daemonSets[i].DeepCopy()
		d.Status.DesiredNumberScheduled, d.Status.NumberAvailable = 1, 1
		objs = append(objs, d)
	}
	for _, s := range m.services {
		objs = append(objs, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		})
		for _, ref := range m.webhookSecrets(&admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name}) {
			crt := ca.leafPEM
			if strings.HasSuffix(ref.Name, "-ca") {
				crt = ca.caPEM
			}
			objs = append(objs, &corev1.Secret{ObjectMeta: ref, Data: map[string][]byte{corev1.TLSCertKey: crt}})
		}
	}
	objs = append(objs, publisherLease(m.namespace, leaderlease.DefaultName, time.Second))
	var metrics []metricsv1beta1.NodeMetrics
	for _, n := range []string{"node-a", "node-b"} {
		objs = append(objs, annotated(n, reclaimable.Annotation{CPUMilli: 1000, MemoryBytes: gib, Policy: "request", WriteTime: now.Add(-time.Minute)}, res(1000, gib)))
		metrics = append(metrics, nodeMetrics(n, "1", "1Gi", 10*time.Second))
	}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": metricsAPIService},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "Passed", "message": "all checks passed",
			"lastTransitionTime": now.Format(time.RFC3339)}}},
	}}
	return install{objects: objs, apiService: svc, metrics: metrics, version: "v1.34.4"}
}

// runDoctor runs `kubectl reclaim doctor -o json args...` against in and
// returns the report and the command's error.
func runDoctor(t *testing.T, in install, args ...string) (*DoctorReport, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	o.Now = func() time.Time { return now }
	o.NewClients = func() (Clients, error) {
		kube := fake.NewClientset(in.objects...)
		disc := kube.Discovery().(*fakediscovery.FakeDiscovery)
		disc.FakedServerVersion = &versioninfo.Info{GitVersion: in.version}
		if in.policyAPI {
			disc.Resources = []*metav1.APIResourceList{{GroupVersion: admissionregistrationv1.SchemeGroupVersion.String(),
				APIResources: []metav1.APIResource{{Name: "validatingadmissionpolicies", Kind: "ValidatingAdmissionPolicy"}}}}
		}
		for _, res := range in.forbidden {
			kube.PrependReactor("list", res, func(a clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("RBAC: access denied"))
			})
		}
		m := metricsfake.NewSimpleClientset()
		m.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, &metricsv1beta1.NodeMetricsList{Items: in.metrics}, nil
		})
		var dynObjs []runtime.Object
		if in.apiService != nil {
			dynObjs = append(dynObjs, in.apiService)
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{apiServiceResource: "APIServiceList"}, dynObjs...)
		return Clients{Kube: kube, Metrics: m, Dynamic: dyn}, nil
	}
	cmd := NewCommand(o)
	cmd.SetArgs(append([]string{"doctor", "-o", "json"}, args...))
	err := cmd.ExecuteContext(context.Background())
	var r DoctorReport
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("doctor -o json: %v\nstdout: %s\nstderr: %s\nerror: %v", jerr, out.String(), errOut.String(), err)
	}
	return &r, err
}

func checkNamed(r *DoctorReport, name string) *DoctorCheck {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

func TestDoctorPassesOnAHealthyInstallOfEveryOverlay(t *testing.T) {
	for _, overlay := range []string{"default", "cert-manager", "own-scheduler"} {
		t.Run(overlay, func(t *testing.T) {
			ca := newTestCA(t, "kube-reclaim-webhook.kube-reclaim.svc")
			r, err := runDoctor(t, healthyInstall(t, overlay, ca), "--overlay", overlay)
			if err != nil {
				t.Errorf("doctor failed: %v", err)
			}
			for _, ch := range r.Checks {
				if ch.Status != CheckOK {
					t.Errorf("%s: %s: %s", ch.Name, ch.Status, ch.Message)
				}
			}
			m, err := loadManifests(overlay, "", testNames)
			if err != nil {
				t.Fatal(err)
			}
			// Every policy, webhook configuration and workload of the
			// manifests has its row.
			var want []string
			for _, p := range m.policies {
				want = append(want, "admission-policy/"+p.Name)
			}
			for _, w := range m.webhooks {
				want = append(want, "webhook/"+w.Name)
			}
			for _, d := range m.deployments {
				want = append(want, "deployment/"+d.Name)
			}
			for _, d := range m.daemonSets {
				want = append(want, "daemonset/"+d.Name)
			}
			want = append(want, "kubernetes-version", "publisher-lease", "metrics-server", "node-annotations")
			if len(m.policies) == 0 || len(m.webhooks) == 0 {
				t.Fatalf("deploy/%s renders %d policies and %d webhook configurations", overlay, len(m.policies), len(m.webhooks))
			}
			for _, name := range want {
				if checkNamed(r, name) == nil {
					t.Errorf("no check %s in %+v", name, r.Checks)
				}
			}
			if overlay != "cert-manager" {
				if c := checkNamed(r, "webhook/kube-reclaim-webhook"); c != nil && !strings.Contains(c.Message, "carries the CA of Secret kube-reclaim/kube-reclaim-webhook-ca") {
					t.Errorf("the self-signed CA was not verified: %s", c.Message)
				}
			} else if c := checkNamed(r, "webhook/kube-reclaim-webhook"); c != nil && !strings.Contains(c.Message, "verifies the serving certificate of Secret kube-reclaim/kube-reclaim-webhook-tls") {
				t.Errorf("the serving certificate was not verified: %s", c.Message)
			}
		})
	}
}

func TestDoctorFailsNamingWhatToFix(t *testing.T) {
	const policy = "kube-reclaim-node-keys"
	tests := []struct {
		name    string
		overlay string
		breakIt func(t *testing.T, in *install)
		check   string
		status  CheckStatus
		want    []string
		// alsoFails are the checks that fail as a consequence.
		alsoFails []string
	}{
		{name: "a policy binding deleted", breakIt: remove(func(o runtime.Object) bool {
			b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
			return ok && b.Name == policy
		}), check: "admission-policy/" + policy, status: CheckFail,
			want: []string{"ValidatingAdmissionPolicyBinding " + policy + " is missing", "kubectl apply -k deploy/default"}},
		{name: "a policy deleted", breakIt: remove(func(o runtime.Object) bool {
			p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			return ok && p.Name == "kube-reclaim-reclaimable-annotation"
		}), check: "admission-policy/kube-reclaim-reclaimable-annotation", status: CheckFail,
			want: []string{"ValidatingAdmissionPolicy kube-reclaim-reclaimable-annotation is missing", "only the kube-reclaim publisher"}},
		{name: "a binding that only warns", breakIt: edit(func(o runtime.Object) {
			if b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok && b.Name == policy {
				b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
			}
		}), check: "admission-policy/" + policy, status: CheckFail, want: []string{"validationActions [Warn], without Deny"}},
		{name: "a policy written for another namespace", breakIt: edit(func(o runtime.Object) {
			if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Name == "kube-reclaim-publisher-node-writes" {
				for i := range p.Spec.MatchConditions {
					p.Spec.MatchConditions[i].Expression = strings.ReplaceAll(p.Spec.MatchConditions[i].Expression, ":kube-reclaim:", ":other:")
				}
			}
		}), check: "admission-policy/kube-reclaim-publisher-node-writes", status: CheckFail,
			want: []string{"does not name system:serviceaccount:kube-reclaim:kube-reclaim-publisher"}},
		{name: "a policy the API server's type check warns about", breakIt: edit(func(o runtime.Object) {
			if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Name == policy {
				p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{
					{FieldRef: "spec.validations[0].expression", Warning: "undefined field 'x'"}}}
			}
		}), check: "admission-policy/" + policy, status: CheckWarn, want: []string{"undefined field 'x'"}},
		{name: "a cluster older than the floor", breakIt: func(_ *testing.T, in *install) { in.version = "v1.29.9" },
			check: "kubernetes-version", status: CheckFail, want: []string{"v1.29.9 is older than 1.30", "upgrade the cluster"}},
		{name: "an unversioned build without the policy API", breakIt: func(_ *testing.T, in *install) { in.version = "v0.0.0-master+$Format:%H$" },
			check: "kubernetes-version", status: CheckFail, want: []string{"does not serve ValidatingAdmissionPolicy admissionregistration.k8s.io/v1"}},
		{name: "an unversioned build serving the policy API", breakIt: func(_ *testing.T, in *install) {
			in.version = "v0.0.0-master+$Format:%H$"
			in.policyAPI = true
		}, check: "kubernetes-version", status: CheckOK, want: []string{"serves ValidatingAdmissionPolicy admissionregistration.k8s.io/v1"}},
		{name: "no caBundle", breakIt: edit(func(o runtime.Object) {
			if w, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
				w.Webhooks[1].ClientConfig.CABundle = nil
			}
		}), check: "webhook/kube-reclaim-webhook", status: CheckFail, want: []string{"has no caBundle"}},
		{name: "a caBundle that is not the CA the webhook signs with", breakIt: func(t *testing.T, in *install) {
			other := newTestCA(t, "kube-reclaim-webhook.kube-reclaim.svc")
			edit(func(o runtime.Object) {
				if w, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
					for i := range w.Webhooks {
						w.Webhooks[i].ClientConfig.CABundle = other.caPEM
					}
				}
			})(t, in)
		}, check: "webhook/kube-reclaim-webhook", status: CheckFail, want: []string{"does not carry the CA in Secret kube-reclaim/kube-reclaim-webhook-ca"}},
		{name: "a serving certificate for another name", overlay: "cert-manager", breakIt: func(t *testing.T, in *install) {
			edit(func(o runtime.Object) {
				if s, ok := o.(*corev1.Secret); ok {
					s.Data[corev1.TLSCertKey] = newTestCA(t, "elsewhere.svc").leafPEM
				}
			})(t, in)
		}, check: "webhook/kube-reclaim-webhook", status: CheckFail, want: []string{"does not verify against the caBundle for kube-reclaim-webhook.kube-reclaim.svc"}},
		{name: "a caBundle that is not PEM", breakIt: edit(func(o runtime.Object) {
			if w, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
				for i := range w.Webhooks {
					w.Webhooks[i].ClientConfig.CABundle = []byte("not a certificate")
				}
			}
		}), check: "webhook/kube-reclaim-webhook", status: CheckFail, want: []string{"not PEM certificates"}},
		{name: "the CA Secret unreadable", breakIt: remove(func(o runtime.Object) bool { _, ok := o.(*corev1.Secret); return ok }),
			check: "webhook/kube-reclaim-webhook", status: CheckWarn, want: []string{"could not check against Secret kube-reclaim/kube-reclaim-webhook-ca"}},
		{name: "no webhook configuration", breakIt: remove(func(o runtime.Object) bool {
			_, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
			return ok
		}), check: "webhook/kube-reclaim-webhook", status: CheckFail, want: []string{"MutatingWebhookConfiguration kube-reclaim-webhook is missing"}},
		{name: "no ready webhook endpoint", breakIt: remove(func(o runtime.Object) bool { _, ok := o.(*discoveryv1.EndpointSlice); return ok }),
			check: "service/kube-reclaim-webhook", status: CheckFail, want: []string{"has no ready endpoint"}},
		{name: "endpoints the caller may not read", breakIt: func(_ *testing.T, in *install) { in.forbidden = []string{"endpointslices"} },
			check: "service/kube-reclaim-webhook", status: CheckWarn, want: []string{"RBAC: access denied", "run it as a cluster admin"}},
		{name: "policies the caller may not read", breakIt: func(_ *testing.T, in *install) { in.forbidden = []string{"validatingadmissionpolicies"} },
			check: "admission-policies", status: CheckWarn, want: []string{"cannot list ValidatingAdmissionPolicies"}},
		{name: "the scheduler without available pods", breakIt: edit(func(o runtime.Object) {
			if d, ok := o.(*appsv1.Deployment); ok && d.Name == "kube-reclaim-scheduler" {
				d.Status.AvailableReplicas = 0
			}
		}), check: "deployment/kube-reclaim-scheduler", status: CheckFail, want: []string{"has no available pod (2 wanted)"}},
		{name: "the publisher with one of two pods", breakIt: edit(func(o runtime.Object) {
			if d, ok := o.(*appsv1.Deployment); ok && d.Name == "kube-reclaim-publisher" {
				d.Status.AvailableReplicas = 1
			}
		}), check: "deployment/kube-reclaim-publisher", status: CheckWarn, want: []string{"1 of 2 pods available"}},
		{name: "the publisher's Lease expired", breakIt: edit(func(o runtime.Object) {
			if l, ok := o.(*coordinationv1.Lease); ok {
				l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(-time.Minute)))
			}
		}), check: "publisher-lease", status: CheckFail, want: []string{"kube-reclaim/kube-reclaim-publisher", "count every node's room as zero"},
			alsoFails: []string{"node-annotations"}},
		{name: "no metrics APIService", breakIt: func(_ *testing.T, in *install) { in.apiService = nil },
			check: "metrics-server", status: CheckFail, want: []string{"no APIService v1beta1.metrics.k8s.io", "install metrics-server"}},
		{name: "the metrics APIService unavailable", breakIt: func(_ *testing.T, in *install) {
			conds, _, _ := unstructured.NestedSlice(in.apiService.Object, "status", "conditions")
			conds[0].(map[string]any)["status"] = "False"
			conds[0].(map[string]any)["reason"] = "FailedDiscoveryCheck"
			_ = unstructured.SetNestedSlice(in.apiService.Object, conds, "status", "conditions")
		}, check: "metrics-server", status: CheckFail, want: []string{"is not Available (FailedDiscoveryCheck"}},
		{name: "no node metrics yet", breakIt: func(_ *testing.T, in *install) { in.metrics = nil },
			check: "metrics-server", status: CheckWarn, want: []string{"no node metrics"}},
		{name: "one stale annotation", breakIt: edit(func(o runtime.Object) {
			if n, ok := o.(*corev1.Node); ok && n.Name == "node-b" {
				v, _ := reclaimable.Annotation{CPUMilli: 1, MemoryBytes: 1, Policy: "request", WriteTime: now.Add(-time.Hour)}.Marshal()
				n.Annotations[testNames.Annotation] = v
			}
		}), check: "node-annotations", status: CheckWarn, want: []string{"1 of 2 annotated nodes fresh", "node-b (annotation written 1h0m0s ago"}},
		{name: "no annotation at all", breakIt: edit(func(o runtime.Object) {
			if n, ok := o.(*corev1.Node); ok {
				delete(n.Annotations, testNames.Annotation)
			}
		}), check: "node-annotations", status: CheckFail, want: []string{"none of 2 nodes carries kube-reclaim.io/reclaimable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overlay := tt.overlay
			if overlay == "" {
				overlay = "default"
			}
			in := healthyInstall(t, overlay, newTestCA(t, "kube-reclaim-webhook.kube-reclaim.svc"))
			tt.breakIt(t, &in)
			r, err := runDoctor(t, in, "--overlay", overlay)
			c := checkNamed(r, tt.check)
			if c == nil {
				t.Fatalf("no check %s in %+v", tt.check, r.Checks)
			}
			if c.Status != tt.status {
				t.Errorf("%s: status %s, want %s: %s", tt.check, c.Status, tt.status, c.Message)
			}
			for _, w := range tt.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("%s: message does not say %q: %s", tt.check, w, c.Message)
				}
			}
			if (err != nil) != (tt.status == CheckFail) || (tt.status == CheckFail) != (r.Failed > 0) {
				t.Errorf("error %v, %d failed, for a %s", err, r.Failed, tt.status)
			}
			// Nothing else breaks.
			for _, other := range r.Checks {
				if other.Name != tt.check && other.Status != CheckOK && !slices.Contains(tt.alsoFails, other.Name) {
					t.Errorf("%s: %s: %s", other.Name, other.Status, other.Message)
				}
			}
		})
	}
}

func TestDoctorExpectsTheInstallsNamespaceAndDomain(t *testing.T) {
	m, err := loadManifests("default", "ops", reclaimable.MustNames("example.com"))
	if err != nil {
		t.Fatal(err)
	}
	p := m.policies[slicesIndex(m.policies, "kube-reclaim-publisher-node-writes")]
	names, err := m.namesIn(&p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"system:serviceaccount:ops:kube-reclaim-publisher", "example.com/reclaimable", "example.com/reclaimed-cpu"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("the policy retargeted to namespace ops and domain example.com does not name %s: %v", want, names)
		}
	}
	for _, n := range names {
		if strings.Contains(n, "kube-reclaim.io/") || strings.Contains(n, ":kube-reclaim:") {
			t.Errorf("still names the manifests' default %s", n)
		}
	}
	if ns := m.webhooks[0].Webhooks[0].ClientConfig.Service.Namespace; ns != "ops" {
		t.Errorf("the webhook calls a Service in %s, want ops", ns)
	}
	if refs := m.webhookSecrets(m.webhooks[0].Webhooks[0].ClientConfig.Service); len(refs) == 0 || refs[0].Namespace != "ops" {
		t.Errorf("the webhook's Secrets %v are not in ops", refs)
	}
}

func slicesIndex(ps []admissionregistrationv1.ValidatingAdmissionPolicy, name string) int {
	for i := range ps {
		if ps[i].Name == name {
			return i
		}
	}
	panic("no policy " + name)
}

func TestDoctorTablePrintsEveryCheck(t *testing.T) {
	var out bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &bytes.Buffer{}})
	d := &doctorFlags{output: newOutputFlags(true)}
	r := &DoctorReport{Checks: []DoctorCheck{{Name: "publisher-lease", Status: CheckFail, Message: "the Lease expired"}, {Name: "metrics-server", Status: CheckOK, Message: "fine"}}}
	if err := printDoctor(o, d, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CHECK") || !strings.Contains(lines[1], "fail") || !strings.Contains(lines[1], "the Lease expired") {
		t.Errorf("table:\n%s", out.String())
	}
}

func remove(match func(runtime.Object) bool) func(*testing.T, *install) {
	return func(_ *testing.T, in *install) {
		var kept []runtime.Object
		for _, o := range in.objects {
			if !match(o) {
				kept = append(kept, o)
			}
		}
		in.objects = kept
	}
}

func edit(change func(runtime.Object)) func(*testing.T, *install) {
	return func(_ *testing.T, in *install) {
		for _, o := range in.objects {
			change(o)
		}
	}
}
