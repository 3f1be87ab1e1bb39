package kubectlreclaim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// installManifests is what doctor expects to find: the objects of the
// shipped overlay, rendered by the deploy package exactly as `kubectl apply
// -k` renders them, so the expected names never drift from the manifests.
type installManifests struct {
	overlay string
	// namespace is the install's; the manifests' own namespace and the
	// default resource domain are replaced by the install's in every
	// object, as deploy/README.md tells users to do.
	namespace string
	names     reclaimable.Names

	policies    []admissionregistrationv1.ValidatingAdmissionPolicy
	bindings    []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	webhooks    []admissionregistrationv1.MutatingWebhookConfiguration
	deployments []appsv1.Deployment
	daemonSets  []appsv1.DaemonSet
	services    []corev1.Service
}

// loadManifests renders overlay for an install in namespace ("" for the
// manifests' own) with names' resource domain.
func loadManifests(overlay, namespace string, names reclaimable.Names) (*installManifests, error) {
	objs, err := deploy.Objects(overlay)
	if err != nil {
		return nil, err
	}
	rendered := ""
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			rendered = o.GetName()
		}
	}
	if rendered == "" {
		return nil, fmt.Errorf("deploy/%s renders no Namespace", overlay)
	}
	if namespace == "" {
		namespace = rendered
	}
	m := &installManifests{overlay: overlay, namespace: namespace, names: names}
	retarget := strings.NewReplacer(
		`"namespace":"`+rendered+`"`, `"namespace":"`+namespace+`"`,
		"system:serviceaccount:"+rendered+":", "system:serviceaccount:"+namespace+":",
		"-namespace="+rendered+`"`, "-namespace="+namespace+`"`,
		reclaimable.DefaultDomain+"/", names.Domain+"/",
	)
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b = []byte(retarget.Replace(string(b)))
		var into any
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			into = appendNew(&m.policies)
		case "ValidatingAdmissionPolicyBinding":
			into = appendNew(&m.bindings)
		case "MutatingWebhookConfiguration":
			into = appendNew(&m.webhooks)
		case "Deployment":
			into = appendNew(&m.deployments)
		case "DaemonSet":
			into = appendNew(&m.daemonSets)
		case "Service":
			into = appendNew(&m.services)
		default:
			continue
		}
		if err := json.Unmarshal(b, into); err != nil {
			return nil, fmt.Errorf("deploy/%s: %s %s: %w", overlay, o.GetKind(), o.GetName(), err)
		}
	}
	return m, nil
}

// appendNew appends a zero T to s and returns it, to be decoded into.
func appendNew[T any](s *[]T) *T {
	*s = append(*s, *new(T))
	return &(*s)[len(*s)-1]
}

// Names in policy expressions: resource, label and annotation keys of the
// install's domain, and the ServiceAccounts of its namespace.
func (m *installManifests) nameTokens() *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(m.names.Domain+"/") + `[A-Za-z0-9][A-Za-z0-9._-]*` +
		`|system:serviceaccount:` + regexp.QuoteMeta(m.namespace) + `:[a-z0-9][a-z0-9.-]*`)
}

// namesIn returns the keys and accounts obj (an API object) names in its
// expressions and fields, messages left out: a message saying a key is not
// a rule about it.
func (m *installManifests) namesIn(obj any) ([]string, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	spec, _, _ := unstructured.NestedFieldNoCopy(u, "spec")
	re := m.nameTokens()
	var found []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k != "message" && k != "messageExpression" {
					walk(e)
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			found = append(found, re.FindAllString(v, -1)...)
		}
	}
	walk(spec)
	slices.Sort(found)
	return slices.Compact(found), nil
}

// installCommand is how the user applies the manifests doctor compares with.
func (m *installManifests) installCommand() string {
	return "kubectl apply -k deploy/" + m.overlay
}
