package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// warningRecorder collects the Warning headers the apiserver returns (Pod
// Security "would violate" warnings on workloads, deprecations).
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// certManagerCRDs are cert-manager's own CRDs, of the release
// hack/tools/cert-manager pins, as one multi-document stream: the overlay's
// Issuers and Certificates are checked against cert-manager's real schema.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	cm, err := cluster.EnsureCertManager(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, f := range cm.CRDs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range strings.Split(string(data), "\n---\n") {
			if d = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---")); d != "" {
				docs = append(docs, d)
			}
		}
	}
	return strings.Join(docs, "\n---\n")
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func installCRDs(t *testing.T, dyn dynamic.Interface, docs string) {
	t.Helper()
	ctx := context.Background()
	var names []string
	for _, doc := range strings.Split(docs, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CRD %s: %v", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		_, ok := framework.Poll(30*time.Second, 100*time.Millisecond, func() bool {
			crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true
				}
			}
			return false
		})
		if !ok {
			t.Fatalf("CRD %s not established", name)
		}
	}
}

// TestDeploy renders every overlay of deploy/ and has the real kube-apiserver
// accept every object with server-side dry run (strict field validation: a
// misspelt field is an error, not silently dropped), with no warnings. The
// namespace is created for real first, as `kubectl apply -k` would. Then
// every Deployment's pod template is submitted as a Pod (dry run), so that
// admission that only looks at pods runs on it: Pod Security "restricted"
// enforced by the namespace label, the priority class, service accounts.
func TestDeploy(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true})
	ctx := context.Background()
	cfg := c.RESTConfig()
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// cert-manager's controllers are not part of this test; its CRDs are.
	installCRDs(t, dyn, certManagerCRDs(t))
	warnings.take()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}

	resourceFor := func(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		gvk := obj.GroupVersionKind()
		var (
			mapping *meta.RESTMapping
			err     error
		)
		// A CRD created a moment ago may take a discovery refresh to show up.
		if _, ok := framework.Poll(20*time.Second, 200*time.Millisecond, func() bool {
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.Reset()
				return false
			}
			return true
		}); !ok {
			t.Fatalf("%s: no resource for it in discovery: %v", gvk, err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				t.Fatalf("%s %s is namespaced but has no namespace", gvk.Kind, obj.GetName())
			}
			return dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if obj.GetNamespace() != "" {
			t.Errorf("%s %s is cluster-scoped but has namespace %s", gvk.Kind, obj.GetName(), obj.GetNamespace())
		}
		return dyn.Resource(mapping.Resource)
	}

	t.Run("pod security is enforced in the rendered namespace", func(t *testing.T) {
		// A control for the warning checks below: with the namespace created
		// from the manifests, an unrestricted pod template draws a Pod Security
		// warning, so their absence for the shipped Deployments means something.
		objs, err := deploy.Objects("default")
		if err != nil {
			t.Fatal(err)
		}
		createNamespaces(t, objs, resourceFor)
		// No securityContext at all: root allowed, capabilities kept, no
		// seccomp profile. (The test apiserver forbids privileged outright.)
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: "kube-reclaim"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		}
		warnings.take()
		if _, err := client.AppsV1().Deployments("kube-reclaim").Create(ctx, d, dryRun); err != nil {
			t.Fatal(err)
		}
		w := warnings.take()
		if !strings.Contains(strings.Join(w, "\n"), "PodSecurity") {
			t.Fatalf("no Pod Security warning for an unrestricted Deployment in the rendered namespace (warnings %q): the checks below would prove nothing", w)
		}
	})

	for _, overlay := range deploy.Overlays {
		t.Run(overlay, func(t *testing.T) {
			objs, err := deploy.Objects(overlay)
			if err != nil {
				t.Fatal(err)
			}
			createNamespaces(t, objs, resourceFor)
			accepted := map[string]int{}
			for _, obj := range objs {
				if obj.GetKind() == "Namespace" {
					continue
				}
				name := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
				ri := resourceFor(t, obj)
				warnings.take()
				if _, err := ri.Create(ctx, obj.DeepCopy(), dryRun); err != nil {
					t.Errorf("%s: rejected: %v", name, err)
					continue
				}
				if w := warnings.take(); len(w) > 0 {
					t.Errorf("%s: accepted with warnings %q", name, w)
				}
				accepted[obj.GetKind()]++
			}
			t.Logf("%s: accepted by server-side dry run: %v", overlay, accepted)

			// Pods as the Deployments would create them. The ServiceAccount
			// admission plugin needs the accounts to exist: create them for real.
			for _, obj := range objs {
				if obj.GetKind() != "ServiceAccount" {
					continue
				}
				ri := resourceFor(t, obj)
				if _, err := ri.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				// Gone before the next overlay's dry run creates them again.
				t.Cleanup(func() {
					if err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
						t.Errorf("deleting ServiceAccount %s: %v", obj.GetName(), err)
					}
				})
			}
			for _, obj := range objs {
				var (
					name     string
					template corev1.PodTemplateSpec
				)
				switch obj.GetKind() {
				case "Deployment":
					var d appsv1.Deployment
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
						t.Fatal(err)
					}
					name, template = "Deployment "+d.Name, d.Spec.Template
				case "DaemonSet":
					var d appsv1.DaemonSet
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
						t.Fatal(err)
					}
					name, template = "DaemonSet "+d.Name, d.Spec.Template
				default:
					continue
				}
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: obj.GetName() + "-dry-run", Namespace: obj.GetNamespace(), Labels: template.Labels},
					Spec:       template.Spec,
				}
				warnings.take()
				got, err := client.CoreV1().Pods(obj.GetNamespace()).Create(ctx, pod, dryRun)
				if err != nil {
					t.Errorf("pod of %s: rejected: %v", name, err)
					continue
				}
				if w := warnings.take(); len(w) > 0 {
					t.Errorf("pod of %s: warnings %q", name, w)
				}
				if got.Spec.Priority == nil || *got.Spec.Priority < 2000000000 {
					t.Errorf("pod of %s: priority %v, want system-cluster-critical's", name, got.Spec.Priority)
				}
			}
		})
	}

	t.Run("the RBAC of the default overlay lets each role do its job and no more", func(t *testing.T) {
		objs, err := deploy.Objects("default")
		if err != nil {
			t.Fatal(err)
		}
		createNamespaces(t, objs, resourceFor)
		for _, obj := range objs {
			switch obj.GetKind() {
			case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
				if _, err := resourceFor(t, obj).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{}); err != nil {
					t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		}
		// The checks below, refusals included, read the authorizer's view.
		waitBindingsInEffect(t, c.Client, objs)
		as := func(sa string) kubernetes.Interface {
			cfg := c.RESTConfig()
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-reclaim:" + sa,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-reclaim", "system:authenticated"}}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
		// Authorization runs before the handler: a 404 means allowed.
		allowed := func(who, what string, err error) {
			t.Helper()
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
				t.Errorf("%s cannot %s: %v", who, what, err)
			}
		}
		forbidden := func(who, what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s can %s (err %v), it should not", who, what, err)
			}
		}
		const ns, lease = "kube-reclaim", "kube-reclaim-publisher"
		byName := metav1.ListOptions{FieldSelector: "metadata.name=" + lease}
		mergePatch := []byte(`{"metadata":{"annotations":{"x":"y"}}}`)
		dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
		metricsNodes := func(cs kubernetes.Interface) error {
			return cs.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").Do(ctx).Error()
		}
		watchLease := func(cs kubernetes.Interface, opts metav1.ListOptions) error {
			w, err := cs.CoordinationV1().Leases(ns).Watch(ctx, opts)
			if err == nil {
				w.Stop()
			}
			return err
		}

		pub := as("kube-reclaim-publisher")
		_, err = pub.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		allowed("publisher", "list nodes", err)
		// The publisher writes the annotation through nodes/status only.
		_, err = pub.CoreV1().Nodes().Patch(ctx, "no-such-node", types.MergePatchType, mergePatch, dry)
		forbidden("publisher", "patch nodes", err)
		_, err = pub.CoreV1().Nodes().Patch(ctx, "no-such-node", types.MergePatchType, mergePatch, dry, "status")
		allowed("publisher", "patch nodes/status", err)
		_, err = pub.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		allowed("publisher", "list pods", err)
		allowed("publisher", "list metrics.k8s.io nodes", metricsNodes(pub))
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: ns}}
		_, err = pub.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
		allowed("publisher", "create its lease", err)
		got, err := pub.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		allowed("publisher", "get its lease", err)
		if err == nil {
			_, err = pub.CoordinationV1().Leases(ns).Update(ctx, got, metav1.UpdateOptions{})
			allowed("publisher", "update its lease", err)
		}
		_, err = pub.CoordinationV1().Leases(ns).Get(ctx, "someone-else", metav1.GetOptions{})
		forbidden("publisher", "get another lease", err)
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "policy.1", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "kube-reclaim-policy"}, Reason: "PolicyReloaded", Type: "Normal"}
		_, err = pub.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed("publisher", "create events", err)
		forbidden("publisher", "delete nodes", pub.CoreV1().Nodes().Delete(ctx, "no-such-node", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}))
		// Eviction on measured pressure is on by default.
		allowed("publisher", "evict pods", pub.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: "default"}, DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}))
		_, err = pub.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		forbidden("publisher", "list secrets", err)

		// The extender runs as a sidecar with the scheduler's account.
		for _, sa := range []string{"kube-reclaim-webhook", "kube-reclaim-scheduler"} {
			cs := as(sa)
			// What leaderlease.Tracker does: list and watch by metadata.name.
			_, err = cs.CoordinationV1().Leases(ns).List(ctx, byName)
			allowed(sa, "list the publisher lease by name", err)
			allowed(sa, "watch the publisher lease by name", watchLease(cs, byName))
			_, err = cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			forbidden(sa, "list every lease", err)
			_, err = cs.CoordinationV1().Leases(ns).Update(ctx, got, metav1.UpdateOptions{})
			forbidden(sa, "update the publisher lease", err)
		}

		wh := as("kube-reclaim-webhook")
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
		allowed("webhook", "get its MutatingWebhookConfiguration", err)
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "someone-else", metav1.GetOptions{})
		forbidden("webhook", "get another MutatingWebhookConfiguration", err)
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		forbidden("webhook", "list MutatingWebhookConfigurations", err)
		_, err = wh.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		forbidden("webhook", "list nodes", err)
		// Profiles: namespace labels and PriorityClasses through informers.
		_, err = wh.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		allowed("webhook", "list namespaces", err)
		_, err = wh.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
		allowed("webhook", "list priorityclasses", err)
		_, err = wh.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		forbidden("webhook", "get a namespace (its informers only list and watch)", err)
		_, err = wh.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		forbidden("webhook", "list pods", err)

		ext := as("kube-reclaim-scheduler")
		_, err = ext.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		allowed("extender", "list nodes", err)
		_, err = ext.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		allowed("extender", "list pods", err)
		_, err = ext.CoreV1().Pods("default").Get(ctx, "no-such-pod", metav1.GetOptions{})
		allowed("extender", "get pods", err)
		err = ext.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "no-such-node"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed("extender", "create pods/binding", err)
		_, err = ext.CoreV1().Nodes().Patch(ctx, "no-such-node", types.MergePatchType, mergePatch, dry)
		forbidden("extender", "patch nodes", err)

		sched := as("kube-reclaim-scheduler")
		sl := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-reclaim-scheduler", Namespace: ns}}
		_, err = sched.CoordinationV1().Leases(ns).Create(ctx, sl, metav1.CreateOptions{})
		allowed("scheduler", "create its lease", err)
		if got, err := sched.CoordinationV1().Leases(ns).Get(ctx, sl.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("scheduler cannot get its lease: %v", err)
		} else {
			_, err = sched.CoordinationV1().Leases(ns).Update(ctx, got, metav1.UpdateOptions{})
			allowed("scheduler", "update its lease", err)
		}
		_, err = sched.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		allowed("scheduler", "read the authentication ConfigMap", err)
		_, err = sched.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		allowed("scheduler", "list pods", err)
		_, err = sched.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		forbidden("scheduler", "list secrets", err)
		// Its own ClusterRole, not system:kube-scheduler: not the default
		// scheduler's Lease, no pod deletion (preemption is off).
		_, err = sched.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		forbidden("scheduler", "get the Lease kube-system/kube-scheduler", err)
		forbidden("scheduler", "delete pods", sched.CoreV1().Pods("default").Delete(ctx, "no-such-pod", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}))
	})

	t.Run("the README's example pod is a valid reclaimed pod", func(t *testing.T) {
		root, err := cluster.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(root, "deploy", "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range regexp.MustCompile("(?s)\n```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
			if !strings.Contains(m[1], "\nkind: Pod\n") {
				continue
			}
			found = true
			var pod corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(m[1]), &pod); err != nil {
				t.Fatal(err)
			}
			if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, &pod, dryRun); err != nil {
				t.Errorf("README pod rejected: %v", err)
			}
		}
		if !found {
			t.Fatal("no example pod in deploy/README.md")
		}
	})
}

// createNamespaces creates the Namespaces among objs for real, with their
// labels (Pod Security), unless they exist; it fails when there is none.
func createNamespaces(t *testing.T, objs []*unstructured.Unstructured, resourceFor func(*testing.T, *unstructured.Unstructured) dynamic.ResourceInterface) {
	t.Helper()
	n := 0
	for _, obj := range objs {
		if obj.GetKind() != "Namespace" {
			continue
		}
		n++
		if _, err := resourceFor(t, obj).Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", obj.GetName(), err)
		}
	}
	if n == 0 {
		t.Fatal("the overlay renders no Namespace")
	}
}

// TestDeployedSchedulerRunsWithItsOwnClusterRole runs the real kube-scheduler
// with the shipped KubeSchedulerConfiguration as the ServiceAccount
// kube-reclaim-scheduler holding only the shipped RBAC (its own ClusterRole,
// not system:kube-scheduler): it must take its Lease, sync every informer,
// bind a pod of its profile and mark an unschedulable one, and never be
// refused anything.
func TestDeployedSchedulerRunsWithItsOwnClusterRole(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	ctx := context.Background()
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}
	var config string
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			createObject(t, c, obj)
		case "ConfigMap":
			if strings.HasPrefix(obj.GetName(), "kube-reclaim-scheduler-config") {
				config, _, _ = unstructured.NestedString(obj.Object, "data", "kube-scheduler-config.yaml")
			}
		}
	}
	if config == "" {
		t.Fatal("no scheduler configuration rendered")
	}
	waitBindingsInEffect(t, c.Client, objs)
	kubeconfig := serviceAccountKubeconfig(t, c, "kube-reclaim", "kube-reclaim-scheduler")
	file := filepath.Join(t.TempDir(), "kube-scheduler-config.yaml")
	// The file as shipped, plus the credentials a pod gets from its
	// ServiceAccount.
	if err := os.WriteFile(file, []byte(config+"clientConnection:\n  kubeconfig: "+kubeconfig+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	const proc = "kube-reclaim-scheduler"
	if err := c.StartProcess(proc, c.Binaries().Scheduler, "--config="+file,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--v=2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopComponent(proc) })

	// Its own Lease, in kube-reclaim.
	if _, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		l, err := c.Client.CoordinationV1().Leases("kube-reclaim").Get(ctx, "kube-reclaim-scheduler", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}); !ok {
		t.Fatalf("kube-scheduler took no Lease kube-reclaim/kube-reclaim-scheduler:\n%s", c.Process(proc).Tail(4096))
	}
	if _, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-system/kube-scheduler Lease: %v, want none (the default scheduler is not running)", err)
	}

	node := framework.AddReadyNodes(t, c, 1, cluster.NodeSpec{NamePrefix: "sched-rbac"}, time.Minute)[0]
	// A pod of the profile that asks no reclaimed resource: the extender is
	// not called, kube-scheduler binds it itself. One no node fits: its
	// PodScheduled condition is written, and no preemption is tried.
	fits := framework.RegularPod("default", "fits", "", "10m", "16Mi")
	fits.Spec.SchedulerName = "kube-reclaim-scheduler"
	stuck := framework.RegularPod("default", "stuck", "", "10m", "16Mi")
	stuck.Spec.SchedulerName = "kube-reclaim-scheduler"
	stuck.Spec.NodeSelector = map[string]string{"kube-reclaim.test/none": "true"}
	framework.CreatePod(t, c, fits)
	framework.CreatePod(t, c, stuck)
	if _, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "fits", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == node
	}); !ok {
		t.Fatalf("pod fits not bound to %s:\n%s", node, c.Process(proc).Tail(8192))
	}
	if _, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	}); !ok {
		t.Fatalf("pod stuck has no PodScheduled=False condition:\n%s", c.Process(proc).Tail(8192))
	}
	// Nothing it tried was refused (a missing informer right shows up as
	// "forbidden" in its log and keeps it from syncing).
	if log := c.Process(proc).Tail(1 << 24); strings.Contains(strings.ToLower(log), "forbidden") {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(strings.ToLower(l), "forbidden") {
				lines = append(lines, l)
			}
		}
		t.Errorf("kube-scheduler was refused with its own ClusterRole:\n%s", strings.Join(lines, "\n"))
	}
}
