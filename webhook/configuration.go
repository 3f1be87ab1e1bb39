package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the shipped webhook configuration (deploy/webhook/mutatingwebhookconfiguration.yaml).
const (
	// DefaultConfigurationName is the MutatingWebhookConfiguration's name.
	DefaultConfigurationName = "kube-reclaim-webhook"
	// WebhookName is the name of its single webhook entry.
	WebhookName = "node-status.kube-reclaim.io"
	// DefaultServiceName and DefaultServiceNamespace locate the Service in front of the webhook.
	DefaultServiceName      = "kube-reclaim-webhook"
	DefaultServiceNamespace = "kube-reclaim"
	// TimeoutSeconds is the apiserver's timeout for one call; with
	// failurePolicy Ignore a slow or absent webhook delays a node status
	// write by at most this and never fails it.
	TimeoutSeconds int32 = 2
)

// MutatingWebhookConfiguration returns the webhook configuration the project
// ships, for clientConfig: a Service reference (as in the YAML) or a URL such
// as https://127.0.0.1:PORT/mutate-node-status with the CA bundle that signs
// the serving certificate (integration tests, the demo).
//
// failurePolicy Ignore, timeoutSeconds 2, sideEffects None, matchPolicy
// Equivalent, admissionReviewVersions [v1, v1beta1], reinvocationPolicy
// IfNeeded, rules: UPDATE nodes/status and CREATE nodes (a kubelet's first
// registration).
func MutatingWebhookConfiguration(name string, clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	failurePolicy := admissionregistrationv1.Ignore
	matchPolicy := admissionregistrationv1.Equivalent
	sideEffects := admissionregistrationv1.SideEffectClassNone
	reinvocation := admissionregistrationv1.IfNeededReinvocationPolicy
	timeout := TimeoutSeconds
	scope := admissionregistrationv1.ClusterScope
	rule := func(op admissionregistrationv1.OperationType, resource string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{""},
				APIVersions: []string{"v1"},
				Resources:   []string{resource},
				Scope:       &scope,
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
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Update, "nodes/status"), rule(admissionregistrationv1.Create, "nodes")},
			FailurePolicy:           &failurePolicy,
			MatchPolicy:             &matchPolicy,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ReinvocationPolicy:      &reinvocation,
		}},
	}
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
