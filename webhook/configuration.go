package webhook

import (
	"fmt"
	"net/url"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Names of the shipped webhook configuration (deploy/webhook/mutatingwebhookconfiguration.yaml).
const (
	// DefaultConfigurationName is the MutatingWebhookConfiguration's name.
	DefaultConfigurationName = "kube-reclaim-webhook"
	// WebhookName is the name of its node status webhook entry.
	WebhookName = "node-status.kube-reclaim.io"
	// PodWebhookName is the name of its pod webhook entry (PodPath).
	PodWebhookName = "pods.kube-reclaim.io"
	// DefaultServiceName and DefaultServiceNamespace locate the Service in front of the webhook.
	DefaultServiceName      = "kube-reclaim-webhook"
	DefaultServiceNamespace = "kube-reclaim"
	// TimeoutSeconds is the apiserver's timeout for one call; with
	// failurePolicy Ignore a slow or absent webhook delays a node status
	// write by at most this and never fails it.
	TimeoutSeconds int32 = 2
	// PodTimeoutSeconds is the pod webhook's timeout. With failurePolicy
	// Fail a call that times out refuses the pod, so it is longer than the
	// node webhook's, yet short enough that a hung webhook does not hold a
	// Job controller's create for long.
	PodTimeoutSeconds int32 = 5
	// PodMatchConditionName names the pod webhook's single matchCondition.
	PodMatchConditionName = "requests-reclaimed-or-opted-in"
)

// OptInLabel is the pod label that sends a pod without reclaimed requests to
// the pod webhook (profiles rewrite such pods), "<domain>/reclaimed" with
// value "true".
func OptInLabel(names reclaimable.Names) string { return names.ReclaimedLabel }

// PodMatchCondition is the CEL expression that selects the pods the API
// server sends to the pod webhook: any container or init container with a
// reclaimed resource in its requests or limits, or the opt-in label set to
// "true". Every other pod is admitted without calling the webhook, so
// failurePolicy Fail never blocks it. has() guards every optional field.
func PodMatchCondition(names reclaimable.Names) string {
	asks := fmt.Sprintf(`(has(c.resources) && `+
		`((has(c.resources.requests) && (%[1]q in c.resources.requests || %[2]q in c.resources.requests)) || `+
		`(has(c.resources.limits) && (%[1]q in c.resources.limits || %[2]q in c.resources.limits))))`,
		string(names.CPU), string(names.Memory))
	return fmt.Sprintf(`(has(object.metadata.labels) && %[1]q in object.metadata.labels && object.metadata.labels[%[1]q] == "true") || `+
		`object.spec.containers.exists(c, %[2]s) || `+
		`(has(object.spec.initContainers) && object.spec.initContainers.exists(c, %[2]s))`,
		OptInLabel(names), asks)
}

// MutatingWebhookConfiguration returns the webhook configuration the project
// ships (default resource domain), for clientConfig: a Service reference (as
// in the YAML) or a URL such as https://127.0.0.1:PORT/mutate-node-status
// with the CA bundle that signs the serving certificate (integration tests,
// the demo).
//
// Two webhooks. node-status: failurePolicy Ignore, timeoutSeconds 2, rules
// UPDATE nodes/status and CREATE nodes (a kubelet's first registration),
// clientConfig as given. pods: failurePolicy Fail, timeoutSeconds 5, rules
// CREATE pods and UPDATE pods/resize (in-place resize, checked against the
// grant), PodMatchCondition, clientConfig the same with path PodPath.
// Both: sideEffects None, matchPolicy Equivalent, admissionReviewVersions
// [v1, v1beta1], reinvocationPolicy IfNeeded.
func MutatingWebhookConfiguration(name string, clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	return MutatingWebhookConfigurationFor(reclaimable.MustNames(reclaimable.DefaultDomain), name, clientConfig)
}

// MutatingWebhookConfigurationFor is MutatingWebhookConfiguration for the
// resource domain of names (the pod webhook's matchCondition names the
// domain's resources and opt-in label).
func MutatingWebhookConfigurationFor(names reclaimable.Names, name string, clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	failurePolicy := admissionregistrationv1.Ignore
	podFailurePolicy := admissionregistrationv1.Fail
	podTimeout := PodTimeoutSeconds
	matchPolicy := admissionregistrationv1.Equivalent
	sideEffects := admissionregistrationv1.SideEffectClassNone
	reinvocation := admissionregistrationv1.IfNeededReinvocationPolicy
	timeout := TimeoutSeconds
	scope := admissionregistrationv1.ClusterScope
	podScope := admissionregistrationv1.NamespacedScope
	rule := func(op admissionregistrationv1.OperationType, resource string, scope *admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{""},
				APIVersions: []string{"v1"},
				Resources:   []string{resource},
				Scope:       scope,
			},
		}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app.kubernetes.io/name": "kube-reclaim", "app.kubernetes.io/component": "webhook"},
		},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    WebhookName,
			ClientConfig:            clientConfig,
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Update, "nodes/status", &scope), rule(admissionregistrationv1.Create, "nodes", &scope)},
			FailurePolicy:           &failurePolicy,
			MatchPolicy:             &matchPolicy,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ReinvocationPolicy:      &reinvocation,
		}, {
			Name:         PodWebhookName,
			ClientConfig: withPath(clientConfig, PodPath),
			// pods/resize changes a running pod's native limits after
			// creation; the same matchCondition sends only reclaimed pods.
			Rules: []admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Create, "pods", &podScope),
				rule(admissionregistrationv1.Update, "pods/resize", &podScope)},
			// Only pods that ask for reclaimed resources or opt in are sent,
			// so refusing when the webhook cannot be called blocks no other
			// pod, and no reclaimed pod runs without its limits.
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: PodMatchConditionName, Expression: PodMatchCondition(names)}},
			FailurePolicy:           &podFailurePolicy,
			MatchPolicy:             &matchPolicy,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &podTimeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ReinvocationPolicy:      &reinvocation,
		}},
	}
}

// withPath returns clientConfig calling path instead: the Service's path, or
// the URL's path with scheme, host and port kept.
func withPath(clientConfig admissionregistrationv1.WebhookClientConfig, path string) admissionregistrationv1.WebhookClientConfig {
	out := *clientConfig.DeepCopy()
	if out.Service != nil {
		out.Service.Path = &path
	}
	if out.URL != nil {
		if u, err := url.Parse(*out.URL); err == nil {
			u.Path, u.RawPath = path, ""
			s := u.String()
			out.URL = &s
		}
	}
	return out
}

// ServiceClientConfig is the clientConfig of the shipped YAML: the Service
// namespace/name on port 443, path Path, with caBundle (may be nil: cert-manager's
// CA injector or --self-signed fills it).
func ServiceClientConfig(namespace, name string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	path := Path
	port := int32(443)
	return admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: name, Path: &path, Port: &port},
		CABundle: caBundle,
	}
}

// URLClientConfig is a clientConfig calling url (for example
// "https://127.0.0.1:8443"+Path) and trusting caBundle.
func URLClientConfig(url string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
}
