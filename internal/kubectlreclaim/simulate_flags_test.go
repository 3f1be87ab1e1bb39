package kubectlreclaim

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestConfigMapReferenceNeedsNamespaceAndName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want types.NamespacedName
		ok   bool
	}{
		{in: "kube-reclaim/kube-reclaim-policy", want: types.NamespacedName{Namespace: "kube-reclaim", Name: "kube-reclaim-policy"}, ok: true},
		{in: "policy"},
		{in: "/policy"},
		{in: "kube-reclaim/"},
		{in: "a/b/c"},
		{in: ""},
	} {
		got, err := parseNamespacedName(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseNamespacedName(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
