// Package integration holds the integration tests of kube-reclaim. Every test
// here runs against the real local control plane of test/cluster: no fakes.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func statDir(dir string) (os.FileInfo, error) { return os.Stat(dir) }

// apiOnlyCluster starts a cluster without metrics-server and scheduler, for
// a test that needs only the API server, and creates the namespace ns in it.
func apiOnlyCluster(t *testing.T, ns string) *cluster.Cluster {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	framework.CreateNamespace(t, c, ns)
	return c
}

// kubeconfigAs writes a kubeconfig of c acting as user with auth into a
// temporary directory of t; it returns its path and a client built from it.
func kubeconfigAs(t *testing.T, c *cluster.Cluster, user string, auth *clientcmdapi.AuthInfo) (string, kubernetes.Interface) {
	t.Helper()
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := c.WriteKubeconfig(path, user, auth); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return path, client
}

// waitBindingsInEffect waits until the apiserver's authorizer grants every
// ServiceAccount bound by a RoleBinding or ClusterRoleBinding of objs the
// first resource rule of its role. RBAC reaches the authorizer through
// informers: right after the objects are created, requests they allow can
// still be refused, and a refusal the test expects would pass for the wrong
// reason.
func waitBindingsInEffect(t *testing.T, client kubernetes.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{} // "Kind/namespace/name" of a role -> its rules
	for _, u := range objs {
		switch u.GetKind() {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // a Role has the same rules
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = r.Rules
		}
	}
	var reviews []*authorizationv1.SubjectAccessReview
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			t.Fatal(err)
		}
		roleNS := ""
		if b.RoleRef.Kind == "Role" {
			roleNS = u.GetNamespace()
		}
		var rule *rbacv1.PolicyRule
		for i, r := range rules[b.RoleRef.Kind+"/"+roleNS+"/"+b.RoleRef.Name] {
			if len(r.Resources) > 0 && len(r.Verbs) > 0 && len(r.APIGroups) > 0 {
				rule = &rules[b.RoleRef.Kind+"/"+roleNS+"/"+b.RoleRef.Name][i]
				break
			}
		}
		if rule == nil {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: u.GetNamespace(), Verb: rule.Verbs[0], Group: rule.APIGroups[0]}
		attrs.Resource, attrs.Subresource, _ = strings.Cut(rule.Resources[0], "/")
		if len(rule.ResourceNames) > 0 {
			attrs.Name = rule.ResourceNames[0]
		}
		for _, s := range b.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			user := "system:serviceaccount:" + s.Namespace + ":" + s.Name
			reviews = append(reviews, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"},
				ResourceAttributes: attrs}})
		}
	}
	if len(reviews) == 0 {
		t.Fatal("no binding of a ServiceAccount to a resource rule: nothing to wait for")
	}
	var refused []string
	took, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		refused = refused[:0]
		for _, r := range reviews {
			got, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), r, metav1.CreateOptions{})
			if err != nil || !got.Status.Allowed {
				refused = append(refused, fmt.Sprintf("%s %+v (%v)", r.Spec.User, *r.Spec.ResourceAttributes, err))
			}
		}
		return len(refused) == 0
	})
	if !ok {
		t.Fatalf("RBAC not in effect within 60s: still refused %v", refused)
	}
	t.Logf("RBAC in effect for %d bound ServiceAccount rules after %s", len(reviews), took.Round(time.Millisecond))
}

// schedulerConfigFor is the profiles and extenders sections of a
// KubeSchedulerConfiguration whose extender is at url, one reclaimed
// profile per name (spread) unless profiles are given.
func schedulerConfigFor(t *testing.T, url string, profiles ...configv1.KubeSchedulerProfile) string {
	t.Helper()
	if len(profiles) == 0 {
		p, err := extender.ReclaimedProfile(extender.SchedulerName, reclaimable.DefaultDomain, extender.StrategySpread)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	profilesYAML, err := extender.ProfilesYAML(profiles...)
	if err != nil {
		t.Fatal(err)
	}
	extCfg, err := extender.ExtenderConfigYAML(url, reclaimable.DefaultDomain)
	if err != nil {
		t.Fatal(err)
	}
	return profilesYAML + extCfg
}

// expectPendingWhileAFitIsPlaced creates a reclaimed pod too big for any
// node (made by newPod) and checks that its FailedScheduling event carries
// every one of reasons, then that it stays Pending, sampled over 5 s, while a
// pod that fits, created as the window's control, is bound to roomy.
func expectPendingWhileAFitIsPlaced(t *testing.T, c *cluster.Cluster, ns, roomy string, newPod func(name string, cpuMilli int64) *corev1.Pod, reasons ...string) {
	t.Helper()
	framework.CreatePod(t, c, newPod("too-big", 100000))
	var msg string
	// A scheduling attempt and the Event's asynchronous write.
	if _, ok := framework.Poll(time.Minute, 500*time.Millisecond, func() bool {
		msg = framework.SchedulingMessage(c, ns, "too-big")
		for _, r := range reasons {
			if !strings.Contains(msg, r) {
				return false
			}
		}
		return true
	}); !ok {
		t.Fatalf("no FailedScheduling event carries the reasons %q; the newest says %q", reasons, msg)
	}
	t.Logf("FailedScheduling: %s", msg)
	r := framework.ExpectAbsence(t, framework.Absence{Window: 5 * time.Second, Every: 250 * time.Millisecond,
		ControlWithin: time.Minute,
		Control: func() error {
			_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), newPod("fits", 1000), metav1.CreateOptions{})
			return err
		},
		Look: func(time.Duration) ([]string, bool) {
			st := framework.MustPods(t, c, ns)
			var v []string
			if n, ok := st.BoundTo["too-big"]; ok {
				v = append(v, "too-big bound to "+n)
			}
			return v, st.BoundTo["fits"] == roomy
		}})
	t.Logf("too-big Pending at all %d looks over 5s; fits bound to %s %.1fs into the window", r.Looks, roomy, r.ControlSeen.Seconds())
}
