package kubectlreclaim

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kube-reclaim/kube-reclaim/deploy"
)

func ok(name, format string, a ...any) DoctorCheck {
	return DoctorCheck{Name: name, Status: CheckOK, Message: fmt.Sprintf(format, a...)}
}

func warn(name, format string, a ...any) DoctorCheck {
	return DoctorCheck{Name: name, Status: CheckWarn, Message: fmt.Sprintf(format, a...)}
}

func fail(name, format string, a ...any) DoctorCheck {
	return DoctorCheck{Name: name, Status: CheckFail, Message: fmt.Sprintf(format, a...)}
}

// cannotRead is the verdict when doctor could not read something: a
// warning when its own credentials lack the right (that says nothing of the
// install; run it as a cluster admin), a failure otherwise.
func cannotRead(err error, name, format string, a ...any) DoctorCheck {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		c := warn(name, format, a...)
		c.Message += "; doctor needs to read it (run it as a cluster admin)"
		return c
	}
	return fail(name, format, a...)
}

// listMax bounds the names a message lists.
const listMax = 5

func listSome(items []string) string {
	if len(items) <= listMax {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:listMax], ", "), len(items)-listMax)
}

func checkVersion(c Clients) DoctorCheck {
	const name = "kubernetes-version"
	floor := version.MustParseGeneric(deploy.MinKubernetes)
	info, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return cannotRead(err, name, "cannot read the server version: %v", err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil || v.Major() == 0 {
		// A build without version stamps (v0.0.0-master): judge by what the
		// floor stands for, the API the manifests need being served.
		return checkPolicyAPI(c, name, info.GitVersion)
	}
	if !v.AtLeast(floor) {
		return fail(name, "Kubernetes %s is older than %s, the oldest the manifests install on (their admission policies are admissionregistration.k8s.io/v1): upgrade the cluster",
			info.GitVersion, deploy.MinKubernetes)
	}
	return ok(name, "Kubernetes %s (%s or newer needed)", info.GitVersion, deploy.MinKubernetes)
}

// checkPolicyAPI judges a server whose version says nothing by whether it
// serves the ValidatingAdmissionPolicies of admissionregistration.k8s.io/v1.
func checkPolicyAPI(c Clients, name, gitVersion string) DoctorCheck {
	gv := admissionregistrationv1.SchemeGroupVersion.String()
	list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		return cannotRead(err, name, "the server version %q says nothing, and reading the resources of %s failed: %v", gitVersion, gv, err)
	}
	if list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "validatingadmissionpolicies" }) {
		return ok(name, "version %q unknown, but it serves ValidatingAdmissionPolicy %s as Kubernetes %s and newer do", gitVersion, gv, deploy.MinKubernetes)
	}
	return fail(name, "version %q unknown, and it does not serve ValidatingAdmissionPolicy %s, which the manifests need (Kubernetes %s or newer): upgrade the cluster",
		gitVersion, gv, deploy.MinKubernetes)
}

// checkAdmissionPolicies checks every policy of the manifests and its
// binding: without either, what the policy guards is open to anyone holding
// the credentials it names (a kubelet, one of kube-reclaim's own tokens).
func checkAdmissionPolicies(ctx context.Context, c Clients, m *installManifests) []DoctorCheck {
	api := c.Kube.AdmissionregistrationV1()
	policies, err := api.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []DoctorCheck{cannotRead(err, "admission-policies", "cannot list ValidatingAdmissionPolicies: %v", err)}
	}
	bindings, err := api.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []DoctorCheck{cannotRead(err, "admission-policies", "cannot list ValidatingAdmissionPolicyBindings: %v", err)}
	}
	var checks []DoctorCheck
	for i := range m.policies {
		want := &m.policies[i]
		i := slices.IndexFunc(policies.Items, func(p admissionregistrationv1.ValidatingAdmissionPolicy) bool { return p.Name == want.Name })
		var have *admissionregistrationv1.ValidatingAdmissionPolicy
		if i >= 0 {
			have = &policies.Items[i]
		}
		checks = append(checks, checkAdmissionPolicy(m, want, have, bindings.Items))
	}
	return checks
}

func checkAdmissionPolicy(m *installManifests, want, have *admissionregistrationv1.ValidatingAdmissionPolicy,
	bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) DoctorCheck {
	name := "admission-policy/" + want.Name
	guards := ""
	if len(want.Spec.Validations) > 0 {
		guards = " (it enforces: " + want.Spec.Validations[0].Message + ")"
	}
	if have == nil {
		return fail(name, "ValidatingAdmissionPolicy %s is missing, so nothing enforces it%s: %s", want.Name, guards, m.installCommand())
	}
	wantNames, err := m.namesIn(want)
	if err != nil {
		return fail(name, "reading the manifests' policy: %v", err)
	}
	haveNames, err := m.namesIn(have)
	if err != nil {
		return fail(name, "reading the installed policy: %v", err)
	}
	if missing := slices.DeleteFunc(slices.Clone(wantNames), func(s string) bool { return slices.Contains(haveNames, s) }); len(missing) > 0 {
		return fail(name, "ValidatingAdmissionPolicy %s does not name %s: it was written for another --resource-domain or namespace, "+
			"or by an older release; apply the manifests of this install (%s, with its namespace and domain)", want.Name, listSome(missing), m.installCommand())
	}
	for _, wb := range m.bindings {
		if wb.Spec.PolicyName != want.Name {
			continue
		}
		if msg := bindingProblem(&wb, bindings); msg != "" {
			return fail(name, "%s, so ValidatingAdmissionPolicy %s is not enforced%s: %s", msg, want.Name, guards, m.installCommand())
		}
	}
	var warnings []string
	if tc := have.Status.TypeChecking; tc != nil {
		for _, w := range tc.ExpressionWarnings {
			warnings = append(warnings, w.FieldRef+": "+w.Warning)
		}
	}
	if len(warnings) > 0 {
		return warn(name, "the API server's type check warns: %s", listSome(warnings))
	}
	what := "no key or account"
	if len(haveNames) > 0 {
		what = listSome(haveNames)
	}
	return ok(name, "present, bound, names %s", what)
}

// bindingProblem says what is wrong with the binding the manifests name
// (want), or "" when it, or another binding denying with the same policy,
// is in place.
func bindingProblem(want *admissionregistrationv1.ValidatingAdmissionPolicyBinding, have []admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
	denies := func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
		switch {
		case b.Spec.PolicyName != want.Spec.PolicyName:
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s binds policy %q instead", b.Name, b.Spec.PolicyName)
		case !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) && slices.Contains(want.Spec.ValidationActions, admissionregistrationv1.Deny):
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s has validationActions %v, without Deny", b.Name, b.Spec.ValidationActions)
		case want.Spec.ParamRef != nil && b.Spec.ParamRef == nil:
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s has no paramRef", b.Name)
		case want.Spec.MatchResources == nil && b.Spec.MatchResources != nil:
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s narrows what it applies to (matchResources)", b.Name)
		}
		return ""
	}
	if i := slices.IndexFunc(have, func(b admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool { return b.Name == want.Name }); i >= 0 {
		return denies(&have[i])
	}
	for i := range have {
		if have[i].Spec.PolicyName == want.Spec.PolicyName && denies(&have[i]) == "" {
			return ""
		}
	}
	return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s is missing", want.Name)
}

// checkWebhooks checks every webhook configuration of the manifests: the
// API server calls a webhook only through a caBundle that verifies its
// serving certificate.
func checkWebhooks(ctx context.Context, c Clients, m *installManifests, now time.Time) []DoctorCheck {
	var checks []DoctorCheck
	for i := range m.webhooks {
		want := &m.webhooks[i]
		name := "webhook/" + want.Name
		have, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			checks = append(checks, fail(name, "MutatingWebhookConfiguration %s is missing: nodes get no reclaimed resources and reclaimed pods are not rewritten; %s",
				want.Name, m.installCommand()))
			continue
		case err != nil:
			checks = append(checks, cannotRead(err, name, "cannot read MutatingWebhookConfiguration %s: %v", want.Name, err))
			continue
		}
		checks = append(checks, checkWebhook(ctx, c, m, want, have, now))
	}
	return checks
}

func checkWebhook(ctx context.Context, c Clients, m *installManifests, want, have *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) DoctorCheck {
	name := "webhook/" + want.Name
	var bundle []byte
	var service *admissionregistrationv1.ServiceReference
	for _, ww := range want.Webhooks {
		i := slices.IndexFunc(have.Webhooks, func(h admissionregistrationv1.MutatingWebhook) bool { return h.Name == ww.Name })
		if i < 0 {
			return fail(name, "MutatingWebhookConfiguration %s has no webhook %s: %s", want.Name, ww.Name, m.installCommand())
		}
		hw := &have.Webhooks[i]
		if ws := ww.ClientConfig.Service; ws != nil {
			hs := hw.ClientConfig.Service
			if hs == nil || hs.Namespace != ws.Namespace || hs.Name != ws.Name {
				return fail(name, "webhook %s does not call the Service %s/%s of this install: %s", ww.Name, ws.Namespace, ws.Name, m.installCommand())
			}
			service = ws
		}
		if len(hw.ClientConfig.CABundle) == 0 {
			return fail(name, "webhook %s has no caBundle, so the API server cannot call it; the webhook's pods fill it in when they start "+
				"(--self-signed; with cert-manager, its CA injector): check their logs", ww.Name)
		}
		if bundle != nil && string(bundle) != string(hw.ClientConfig.CABundle) {
			return fail(name, "the webhooks of %s carry different caBundles: restart the webhook's pods, which write both", want.Name)
		}
		bundle = hw.ClientConfig.CABundle
	}
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return fail(name, "the caBundle is not PEM certificates (%v): restart the webhook's pods, which write it", err)
	}
	roots := x509.NewCertPool()
	var valid []*x509.Certificate
	for _, ca := range certs {
		if ca.IsCA && !now.Before(ca.NotBefore) && now.Before(ca.NotAfter) {
			roots.AddCert(ca)
			valid = append(valid, ca)
		}
	}
	if len(valid) == 0 {
		return fail(name, "the caBundle holds no CA certificate valid now (%d certificates, none a CA within its validity): restart the webhook's pods, which renew it", len(certs))
	}
	until := valid[0].NotAfter
	for _, ca := range valid {
		if ca.NotAfter.After(until) {
			until = ca.NotAfter
		}
	}
	msg := fmt.Sprintf("%d webhooks, caBundle holds %d valid CA (until %s)", len(want.Webhooks), len(valid), until.UTC().Format(time.DateOnly))
	if service == nil {
		return ok(name, "%s", msg)
	}
	verified, unreadable, problem := verifyServing(ctx, c, m, service, roots, now)
	switch {
	case problem != "":
		return fail(name, "%s", problem)
	case verified == "":
		return warn(name, "%s; %s", msg, unreadable)
	}
	return ok(name, "%s; %s", msg, verified)
}

// verifyServing verifies the certificates the webhook's pods serve with, as
// far as their Secrets (named in the manifests' webhook Deployment) are
// readable: a serving certificate must verify against roots for the
// Service's DNS name, a CA the webhook signs with must be one of roots. It
// returns what verified, what could not be read and what does not verify.
func verifyServing(ctx context.Context, c Clients, m *installManifests, svc *admissionregistrationv1.ServiceReference, roots *x509.CertPool,
	now time.Time) (verifiedMsg, unreadableMsg, problem string) {
	dnsName := svc.Name + "." + svc.Namespace + ".svc"
	var verified, unreadable []string
	for _, ref := range m.webhookSecrets(svc) {
		s, err := c.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("Secret %s/%s: %v", ref.Namespace, ref.Name, err))
			continue
		}
		certs, err := certutil.ParseCertsPEM(s.Data[corev1.TLSCertKey])
		if err != nil {
			return "", "", fmt.Sprintf("Secret %s/%s holds no certificate in %s (%v): restart the webhook's pods", ref.Namespace, ref.Name, corev1.TLSCertKey, err)
		}
		leaf := certs[0]
		if leaf.IsCA {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now}); err != nil {
				return "", "", fmt.Sprintf("the caBundle does not carry the CA in Secret %s/%s that the webhook signs its certificates with: "+
					"the API server will refuse them; restart the webhook's pods, which patch the caBundle", ref.Namespace, ref.Name)
			}
			verified = append(verified, fmt.Sprintf("carries the CA of Secret %s/%s", ref.Namespace, ref.Name))
			continue
		}
		inter := x509.NewCertPool()
		for _, ic := range certs[1:] {
			inter.AddCert(ic)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: dnsName, CurrentTime: now}); err != nil {
			return "", "", fmt.Sprintf("the serving certificate in Secret %s/%s does not verify against the caBundle for %s (%v): "+
				"the API server cannot call the webhook; renew the certificate or the caBundle", ref.Namespace, ref.Name, dnsName, err)
		}
		verified = append(verified, fmt.Sprintf("verifies the serving certificate of Secret %s/%s for %s", ref.Namespace, ref.Name, dnsName))
	}
	if len(unreadable) > 0 {
		unreadableMsg = "could not check against " + listSome(unreadable)
	}
	return strings.Join(verified, ", "), unreadableMsg, ""
}

// webhookSecrets are the Secrets holding what the webhook behind svc serves
// with, as its Deployment in the manifests names them: mounted TLS Secrets
// and the CA Secret of --self-signed (--ca-secret-name).
func (m *installManifests) webhookSecrets(svc *admissionregistrationv1.ServiceReference) []metav1.ObjectMeta {
	var refs []metav1.ObjectMeta
	for _, s := range m.services {
		if s.Namespace != svc.Namespace || s.Name != svc.Name {
			continue
		}
		for _, d := range m.deployments {
			if d.Namespace != s.Namespace || len(s.Spec.Selector) == 0 || !selects(s.Spec.Selector, d.Spec.Template.Labels) {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					refs = append(refs, metav1.ObjectMeta{Namespace: d.Namespace, Name: v.Secret.SecretName})
				}
			}
			for _, ct := range d.Spec.Template.Spec.Containers {
				caName, caNamespace := flagValue(ct.Args, "--ca-secret-name"), flagValue(ct.Args, "--ca-secret-namespace")
				if caName != "" {
					if caNamespace == "" {
						caNamespace = d.Namespace
					}
					refs = append(refs, metav1.ObjectMeta{Namespace: caNamespace, Name: caName})
				}
			}
		}
	}
	return refs
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, found := strings.CutPrefix(a, name+"="); found {
			return v
		}
	}
	return ""
}

// checkServices checks that every Service of the manifests has a ready
// endpoint: the API server calls the webhook through it.
func checkServices(ctx context.Context, c Clients, m *installManifests) []DoctorCheck {
	var checks []DoctorCheck
	for _, s := range m.services {
		name := "service/" + s.Name
		list, err := c.Kube.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + s.Name})
		if err != nil {
			checks = append(checks, cannotRead(err, name, "cannot list the EndpointSlices of Service %s/%s: %v", s.Namespace, s.Name, err))
			continue
		}
		ready := 0
		for _, sl := range list.Items {
			for _, e := range sl.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready++
				}
			}
		}
		if ready == 0 {
			checks = append(checks, fail(name, "Service %s/%s has no ready endpoint, so the API server cannot call the webhook: pods asking for reclaimed resources "+
				"are refused and nodes get none; check its pods (kubectl -n %s get pods -l %s)", s.Namespace, s.Name, s.Namespace, selectorString(s.Spec.Selector)))
			continue
		}
		checks = append(checks, ok(name, "%d ready endpoints", ready))
	}
	return checks
}

func selectorString(sel map[string]string) string {
	return metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: sel})
}

// checkWorkloads checks that every Deployment and DaemonSet of the manifests
// has available pods: kube-reclaim-scheduler's pods hold the scheduler
// profile and the extender, the others are the publisher and the webhook.
func checkWorkloads(ctx context.Context, c Clients, m *installManifests) []DoctorCheck {
	var checks []DoctorCheck
	apps := c.Kube.AppsV1()
	for _, want := range m.deployments {
		name := "deployment/" + want.Name
		d, err := apps.Deployments(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			checks = append(checks, workloadMissing(name, "Deployment", want.ObjectMeta, m, err))
			continue
		}
		checks = append(checks, workloadAvailable(name, "Deployment", d.ObjectMeta, d.Status.AvailableReplicas, replicas(d), m))
	}
	for _, want := range m.daemonSets {
		name := "daemonset/" + want.Name
		d, err := apps.DaemonSets(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			checks = append(checks, workloadMissing(name, "DaemonSet", want.ObjectMeta, m, err))
			continue
		}
		checks = append(checks, workloadAvailable(name, "DaemonSet", d.ObjectMeta, d.Status.NumberAvailable, d.Status.DesiredNumberScheduled, m))
	}
	return checks
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func workloadMissing(name, kind string, want metav1.ObjectMeta, m *installManifests, err error) DoctorCheck {
	if apierrors.IsNotFound(err) {
		return fail(name, "%s %s/%s is missing: %s", kind, want.Namespace, want.Name, m.installCommand())
	}
	return cannotRead(err, name, "cannot read %s %s/%s: %v", kind, want.Namespace, want.Name, err)
}

func workloadAvailable(name, kind string, meta metav1.ObjectMeta, available, desired int32, m *installManifests) DoctorCheck {
	look := fmt.Sprintf("kubectl -n %s describe %s %s", meta.Namespace, strings.ToLower(kind), meta.Name)
	switch {
	case available == 0:
		return fail(name, "%s %s/%s has no available pod (%d wanted): see why with %s and the pods' logs", kind, meta.Namespace, meta.Name, desired, look)
	case available < desired:
		return warn(name, "%s %s/%s has %d of %d pods available: see why with %s", kind, meta.Namespace, meta.Name, available, desired, look)
	}
	return ok(name, "%d of %d pods available", available, desired)
}

// checkLease judges the publisher's Lease as the webhook and the extender
// do; it returns the Lease for the node check.
func checkLease(ctx context.Context, c Clients, f *stalenessFlags, now time.Time) (*LeaseReport, DoctorCheck) {
	const name = "publisher-lease"
	lease, err := f.leaderLease(ctx, c.Kube, now)
	switch {
	case lease == nil:
		return nil, ok(name, "not checked (--publisher-lease-name is empty)")
	case err != nil:
		return lease, warn(name, "%v", err)
	case !lease.Alive:
		return lease, fail(name, "the publisher's Lease %s/%s: %s; the webhook and the extender count every node's room as zero until a publisher "+
			"renews it: check the publisher's pods and logs", lease.Namespace, lease.Name, lease.Detail)
	}
	return lease, ok(name, "held: %s", lease.Detail)
}

// metricsAPIService is the APIService metrics-server registers.
var (
	apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	metricsAPIService  = "v1beta1.metrics.k8s.io"
)

// checkMetrics checks that metrics.k8s.io answers with node metrics: the
// publisher's usage policies and its profiles read them.
func checkMetrics(ctx context.Context, c Clients) DoctorCheck {
	const name = "metrics-server"
	if c.Dynamic != nil {
		u, err := c.Dynamic.Resource(apiServiceResource).Get(ctx, metricsAPIService, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fail(name, "no APIService %s: install metrics-server (or another metrics.k8s.io provider); the publisher needs node and pod usage", metricsAPIService)
		case err != nil:
			return cannotRead(err, name, "cannot read APIService %s: %v", metricsAPIService, err)
		}
		if status, reason, message := apiServiceAvailable(u); status != string(metav1.ConditionTrue) {
			return fail(name, "APIService %s is not Available (%s: %s): the API server cannot reach metrics-server; check its pods and Service", metricsAPIService, reason, message)
		}
	}
	if c.Metrics == nil {
		return fail(name, "no metrics.k8s.io client")
	}
	list, err := c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fail(name, "listing node metrics: %v; the publisher needs them: check metrics-server's pods and logs", err)
	}
	if len(list.Items) == 0 {
		return warn(name, "metrics.k8s.io answers with no node metrics: metrics-server needs a scrape or two after it starts; if this stays, check its logs")
	}
	return ok(name, "metrics.k8s.io lists metrics of %d nodes", len(list.Items))
}

func apiServiceAvailable(u *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		var cond metav1.Condition
		m, _ := c.(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond); err == nil && cond.Type == "Available" {
			return string(cond.Status), cond.Reason, cond.Message
		}
	}
	return "Unknown", "NoCondition", "no Available condition"
}

// checkNodeAnnotations judges every node's annotation as the webhook and
// the extender do (reclaimable.Judge with the Lease).
func checkNodeAnnotations(ctx context.Context, c Clients, m *installManifests, f *stalenessFlags, lease *LeaseReport, now time.Time) DoctorCheck {
	const name = "node-annotations"
	var fresh, total int
	var stale []string
	err := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		total++
		value, present := n.Annotations[m.names.Annotation]
		if !present {
			return nil
		}
		if j := judge(value, present, now, f.StaleAfter, lease); j.Fresh {
			fresh++
		} else {
			stale = append(stale, n.Name+" ("+j.Detail+")")
		}
		return nil
	})
	if err != nil {
		return fail(name, "listing nodes: %v", err)
	}
	annotated := fresh + len(stale)
	switch {
	case annotated == 0:
		return fail(name, "none of %d nodes carries %s: the publisher has published nothing; check its logs "+
			"and that its policy's pools select nodes", total, m.names.Annotation)
	case fresh == 0:
		return fail(name, "no node's annotation counts (%s): every node's room is zero; check the publisher", listSome(stale))
	case len(stale) > 0:
		return warn(name, "%d of %d annotated nodes fresh; stale, so counted as zero: %s", fresh, annotated, listSome(stale))
	}
	return ok(name, "%d of %d nodes carry a fresh annotation", fresh, total)
}
