package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

const (
	reclaimableKey = "kube-reclaim.io/reclaimable"
	publisherSA    = "system:serviceaccount:kube-reclaim:kube-reclaim-publisher"
	webhookSA      = "system:serviceaccount:kube-reclaim:kube-reclaim-webhook"
	schedulerSA    = "system:serviceaccount:kube-reclaim:kube-reclaim-scheduler"
)

// TestAdmissionPolicies applies the shipped ValidatingAdmissionPolicies (and
// the shipped RBAC) to a real kube-apiserver running the Node authorizer and
// NodeRestriction, and shows each write they exist to stop refused by the
// policy that names it, next to the write of the same client that must pass.
func TestAdmissionPolicies(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	ctx := context.Background()
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}

	// The namespace, the ServiceAccounts and RBAC of the default overlay, and
	// the webhook configuration made inert (an objectSelector nothing
	// carries: no write of this test goes to a webhook that is not running).
	var policies []*unstructured.Unstructured
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			createObject(t, c, obj)
		case "MutatingWebhookConfiguration":
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cfg); err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kube-reclaim.test/never": "true"}}
			}
			if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &cfg, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			policies = append(policies, obj)
		}
	}
	if len(policies) != 10 {
		t.Fatalf("the default overlay renders %d policies and bindings, want 5 of each", len(policies))
	}
	waitBindingsInEffect(t, c.Client, objs)

	// Two nodes, created as admin before the policies exist.
	const nodeName, otherNode = "policy-node", "policy-other-node"
	for _, n := range []string{nodeName, otherNode} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kube-reclaim.io/pool": "batch"},
			Annotations: map[string]string{reclaimableKey: `{"old":true}`}}}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, obj := range policies {
		createObject(t, c, obj)
		// Other tests write the annotation as admin: leave no policy behind.
		t.Cleanup(func() {
			ri := c.Dynamic.Resource(admissionregistrationv1.SchemeGroupVersion.WithResource(strings.ToLower(obj.GetKind()) + "s"))
			if err := ri.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		})
	}

	admin := c.Client
	kubelet := clientFor(t, mustNodeConfig(t, c, nodeName))
	pub := impersonate(t, c, publisherSA)
	wh := impersonate(t, c, webhookSA)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	dryCreate := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	createLease := func(cs kubernetes.Interface, name string, opts metav1.CreateOptions) error {
		_, err := cs.CoordinationV1().Leases("kube-reclaim").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, opts)
		return err
	}
	annotate := func(v string) []byte {
		return []byte(`{"metadata":{"annotations":{"` + reclaimableKey + `":` + jsonString(v) + `}}}`)
	}
	label := func(k, v string) []byte { return []byte(`{"metadata":{"labels":{"` + k + `":` + jsonString(v) + `}}}`) }
	patchStatus := func(cs kubernetes.Interface, node string, patch []byte, opts metav1.PatchOptions) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, opts, "status")
		return err
	}
	patchNode := func(cs kubernetes.Interface, node string, patch []byte, opts metav1.PatchOptions) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, opts)
		return err
	}
	rulesChanged := func() error {
		cfg, err := wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cfg.Webhooks[0].Rules[0].Operations = append(cfg.Webhooks[0].Rules[0].Operations, admissionregistrationv1.Delete)
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	// Policies reach the admission chain through informers: wait until each
	// one refuses its probe (dry runs: admission runs, nothing is stored).
	probes := map[string]func() error{
		"kube-reclaim-reclaimable-annotation": func() error { return patchStatus(admin, nodeName, annotate("by admin"), dry) },
		"kube-reclaim-publisher-node-writes":  func() error { return patchStatus(pub, nodeName, label("example.com/x", "y"), dry) },
		"kube-reclaim-webhook-configuration":  rulesChanged,
		"kube-reclaim-node-keys":              func() error { return patchNode(kubelet, nodeName, label("kube-reclaim.io/pool", "mine"), dry) },
		"kube-reclaim-own-objects":            func() error { return createLease(pub, "kube-reclaim-scheduler", dryCreate) },
	}
	var pending []string
	took, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		pending = pending[:0]
		for name, probe := range probes {
			if !deniedBy(probe(), name) {
				pending = append(pending, name)
			}
		}
		return len(pending) == 0
	})
	if !ok {
		t.Fatalf("policies not in effect within 60s: %v", pending)
	}
	t.Logf("all five policies in effect after %s", took.Round(time.Millisecond))

	// The apiserver type-checks every expression against the schemas; a
	// misspelt field would show up as a warning here.
	for _, p := range admissionPolicyNames(policies) {
		var got *admissionregistrationv1.ValidatingAdmissionPolicy
		if _, ok := framework.Poll(30*time.Second, 250*time.Millisecond, func() bool {
			got, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, p, metav1.GetOptions{})
			return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.TypeChecking != nil
		}); !ok {
			t.Fatalf("policy %s: no type checking result: %v", p, err)
		}
		if w := got.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Errorf("policy %s: type checking warnings %+v", p, w)
		}
	}

	t.Run("a kubelet cannot write the reclaimable annotation of its own node", func(t *testing.T) {
		// Positive controls: the node identity may write its own node (a
		// heartbeat, an ordinary label) and NodeRestriction is on (not
		// another node).
		hb := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"` +
			time.Now().UTC().Format(time.RFC3339) + `"}]}}`)
		mustAllow(t, "kubelet heartbeat", patchStatus(kubelet, nodeName, hb, metav1.PatchOptions{}))
		mustAllow(t, "kubelet ordinary label", patchNode(kubelet, nodeName, label("example.com/zone", "a"), metav1.PatchOptions{}))
		if err := patchStatus(kubelet, otherNode, hb, dry); !apierrors.IsForbidden(err) {
			t.Errorf("kubelet of %s patching %s: %v, want NodeRestriction's refusal", nodeName, otherNode, err)
		}
		for what, err := range map[string]error{
			"annotation through nodes/status": patchStatus(kubelet, nodeName, annotate(`{"forged":true}`), metav1.PatchOptions{}),
			"annotation through nodes":        patchNode(kubelet, nodeName, annotate(`{"forged":true}`), metav1.PatchOptions{}),
			"annotation removed":              patchStatus(kubelet, nodeName, []byte(`{"metadata":{"annotations":{"`+reclaimableKey+`":null}}}`), metav1.PatchOptions{}),
		} {
			// Two policies forbid it (the annotation's and the node keys');
			// the API server reports whichever it evaluated first.
			if !strings.Contains(fmt.Sprint(err), "kube-reclaim-node-keys") {
				mustDenyBy(t, "kubelet "+what, err, "kube-reclaim-reclaimable-annotation")
			}
		}
		// Nor may an administrator: only the publisher writes it.
		mustDenyBy(t, "admin annotation", patchNode(admin, nodeName, annotate("x"), dry), "kube-reclaim-reclaimable-annotation")
		node, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Annotations[reclaimableKey]; got != `{"old":true}` {
			t.Errorf("annotation %q after the refused writes", got)
		}
	})

	t.Run("a kubelet cannot set kube-reclaim.io labels", func(t *testing.T) {
		mustDenyBy(t, "kubelet pool label", patchNode(kubelet, nodeName, label("kube-reclaim.io/pool", "mine"), metav1.PatchOptions{}), "kube-reclaim-node-keys")
		mustDenyBy(t, "kubelet pool label removed", patchNode(kubelet, nodeName, []byte(`{"metadata":{"labels":{"kube-reclaim.io/pool":null}}}`), metav1.PatchOptions{}), "kube-reclaim-node-keys")
		mustDenyBy(t, "kubelet other annotation", patchStatus(kubelet, nodeName, []byte(`{"metadata":{"annotations":{"kube-reclaim.io/anything":"x"}}}`), metav1.PatchOptions{}), "kube-reclaim-node-keys")
		// An administrator may.
		mustAllow(t, "admin pool label", patchNode(admin, nodeName, label("kube-reclaim.io/pool", "latency"), metav1.PatchOptions{}))
	})

	t.Run("the publisher writes its annotation and reclaimed values and nothing else", func(t *testing.T) {
		mustAllow(t, "publisher annotation", patchStatus(pub, nodeName, annotate(`{"new":true}`), metav1.PatchOptions{}))
		mustAllow(t, "publisher reclaimed values", patchStatus(pub, nodeName, []byte(`{"status":{"capacity":{"kube-reclaim.io/reclaimed-cpu":"1000"},`+
			`"allocatable":{"kube-reclaim.io/reclaimed-cpu":"1000","kube-reclaim.io/reclaimed-memory":"1048576"}}}`), metav1.PatchOptions{}))
		node, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := node.Status.Allocatable["kube-reclaim.io/reclaimed-cpu"]; node.Annotations[reclaimableKey] != `{"new":true}` || q.Value() != 1000 {
			t.Errorf("publisher's writes not stored: annotation %q, allocatable %v", node.Annotations[reclaimableKey], node.Status.Allocatable)
		}
		for what, patch := range map[string]string{
			"a label":                `{"metadata":{"labels":{"example.com/x":"y"}}}`,
			"another annotation":     `{"metadata":{"annotations":{"example.com/x":"y"}}}`,
			"a condition":            `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Forged"}]}}`,
			"native allocatable":     `{"status":{"allocatable":{"cpu":"64"}}}`,
			"another extended value": `{"status":{"capacity":{"example.com/gpu":"8"}}}`,
			"the addresses":          `{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`,
		} {
			mustDenyBy(t, "publisher "+what, patchStatus(pub, nodeName, []byte(patch), metav1.PatchOptions{}), "kube-reclaim-publisher-node-writes")
		}
		// Both policies refuse this one and kube-apiserver reports whichever
		// it evaluated first, which is not a fixed order.
		mustDenyBy(t, "publisher a kube-reclaim.io label", patchStatus(pub, nodeName, []byte(`{"metadata":{"labels":{"kube-reclaim.io/pool":null}}}`), metav1.PatchOptions{}),
			"kube-reclaim-publisher-node-writes", "kube-reclaim-node-keys")
	})

	t.Run("the publisher changes no NodeStatus field but the reclaimed values, whatever fields NodeStatus has", func(t *testing.T) {
		// Every field of corev1.NodeStatus, found by reflection, must have
		// a change here: a field a later Kubernetes adds fails the test
		// until it has one, and then shows whether the policy refuses it.
		changes := map[string]string{
			"capacity":        `{"cpu":"64"}`,
			"allocatable":     `{"memory":"1Ti"}`,
			"phase":           `"Terminated"`,
			"conditions":      `[{"type":"Ready","status":"False","reason":"Forged"}]`,
			"addresses":       `[{"type":"InternalIP","address":"10.0.0.9"}]`,
			"daemonEndpoints": `{"kubeletEndpoint":{"Port":10999}}`,
			"nodeInfo":        `{"kernelVersion":"forged"}`,
			"images":          `[{"names":["forged.example/image:1"],"sizeBytes":1}]`,
			"volumesInUse":    `["kubernetes.io/csi/forged^vol"]`,
			"volumesAttached": `[{"name":"kubernetes.io/csi/forged^vol","devicePath":"/dev/forged"}]`,
			"config":          `{"error":"forged"}`,
			"runtimeHandlers": `[{"name":"forged","features":{"recursiveReadOnlyMounts":true}}]`,
			"features":        `{"supplementalGroupsPolicy":true}`,
		}
		current := func() map[string]json.RawMessage {
			n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return statusFields(t, n)
		}
		checked := 0
		st := reflect.TypeFor[corev1.NodeStatus]()
		for i := range st.NumField() {
			field, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
			change, ok := changes[field]
			if !ok {
				t.Errorf("corev1.NodeStatus has a field %q (%s) this test cannot change: add a change for it, and see that kube-reclaim-publisher-node-writes refuses it", field, st.Field(i).Name)
				continue
			}
			patch := []byte(`{"status":{"` + field + `":` + change + `}}`)
			// Positive control: the same patch as admin (dry run) changes
			// the field; one the API server drops on update (status.config
			// of a node that never had one) changes nothing for anyone.
			before := current()
			got, err := admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, dry, "status")
			if err != nil {
				t.Errorf("admin dry-run patch of status.%s: %v", field, err)
				continue
			}
			if string(statusFields(t, got)[field]) == string(before[field]) {
				t.Logf("status.%s: the API server drops this change for every writer (%s)", field, change)
				continue
			}
			mustDenyBy(t, "publisher status."+field, patchStatus(pub, nodeName, patch, metav1.PatchOptions{}), "kube-reclaim-publisher-node-writes")
			checked++
		}
		if checked < len(changes)-2 {
			t.Errorf("only %d of %d NodeStatus fields could be changed at all", checked, len(changes))
		}
		// Positive control: the reclaimed values in the same two maps.
		mustAllow(t, "publisher reclaimed values", patchStatus(pub, nodeName, []byte(`{"status":{"capacity":{"kube-reclaim.io/reclaimed-memory":"2097152"},`+
			`"allocatable":{"kube-reclaim.io/reclaimed-memory":"2097152"}}}`), metav1.PatchOptions{}))
	})

	t.Run("pool and oversell keys: a DaemonSet holding nodes and nodes/status patch may not change them, an identity the admin listed may", func(t *testing.T) {
		// What node problem detectors and CNI agents commonly hold,
		// cluster-wide, and an administrator bound to the shipped
		// ClusterRole kube-reclaim-node-label-admin beside the same rights.
		const daemon, labelAdmin = "system:serviceaccount:kube-system:node-agent", "node-label-admin"
		rbac := admin.RbacV1()
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-node-patcher"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "create", "patch", "update"}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string]rbacv1.ClusterRoleBinding{
			"test-node-patcher-daemon": {RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-node-patcher"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "node-agent"}}},
			"test-node-patcher-admin": {RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-node-patcher"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: labelAdmin}}},
			"test-node-label-admin": {RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kube-reclaim-node-label-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: labelAdmin}}},
		} {
			b.Name = name
			if _, err := rbac.ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		agent := impersonate(t, c, daemon)
		listed := impersonateUser(t, c, labelAdmin, "system:authenticated")
		const oversell = "node-restriction.kubernetes.io/kube-reclaim.io-oversell-memory-ratio"
		// RBAC takes a moment to reach the authorizer: wait for the
		// positive controls (both may patch an ordinary label).
		if _, ok := framework.Poll(30*time.Second, 250*time.Millisecond, func() bool {
			return patchStatus(agent, nodeName, label("example.com/agent", "x"), dry) == nil &&
				patchNode(listed, nodeName, label("example.com/admin", "x"), dry) == nil
		}); !ok {
			t.Fatal("RBAC of the two test identities not in effect within 30s")
		}
		hb := []byte(`{"status":{"conditions":[{"type":"NetworkUnavailable","status":"False","reason":"AgentReady"}]}}`)
		mustAllow(t, "agent status condition", patchStatus(agent, nodeName, hb, metav1.PatchOptions{}))
		mustAllow(t, "agent ordinary label through nodes/status", patchStatus(agent, nodeName, label("example.com/agent", "x"), metav1.PatchOptions{}))
		mustAllow(t, "agent ordinary label through nodes", patchNode(agent, nodeName, label("example.com/agent", "y"), metav1.PatchOptions{}))

		for what, patch := range map[string][]byte{
			"oversell ratio set":  label(oversell, "10"),
			"pool key changed":    label("kube-reclaim.io/pool", "mine"),
			"pool key removed":    []byte(`{"metadata":{"labels":{"kube-reclaim.io/pool":null}}}`),
			"another domain key":  label("kube-reclaim.io/anything", "x"),
			"cpu oversell ratio":  label("node-restriction.kubernetes.io/kube-reclaim.io-oversell-cpu-ratio", "10"),
			"both in one request": []byte(`{"metadata":{"labels":{"example.com/agent":"z","` + oversell + `":"10"}}}`),
		} {
			mustDenyBy(t, "agent "+what+" through nodes/status", patchStatus(agent, nodeName, patch, metav1.PatchOptions{}), "kube-reclaim-node-keys")
			mustDenyBy(t, "agent "+what+" through nodes", patchNode(agent, nodeName, patch, metav1.PatchOptions{}), "kube-reclaim-node-keys")
		}
		// Create too: a node registered with the keys.
		withKeys := func(name string) *corev1.Node {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{oversell: "10", "kube-reclaim.io/pool": "batch"}}}
		}
		_, err := agent.CoreV1().Nodes().Create(ctx, withKeys("agent-made"), dryCreate)
		mustDenyBy(t, "agent node created with the keys", err, "kube-reclaim-node-keys")
		_, err = agent.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-made-plain"}}, dryCreate)
		mustAllow(t, "agent node created without them", err)

		node, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, set := node.Labels[oversell]; set || node.Labels["kube-reclaim.io/pool"] != "latency" {
			t.Errorf("labels after the refused writes: %v", node.Labels)
		}

		// The identity the admin listed, through either path and on create.
		mustAllow(t, "listed admin oversell ratio through nodes", patchNode(listed, nodeName, label(oversell, "1.5"), metav1.PatchOptions{}))
		mustAllow(t, "listed admin pool key through nodes/status", patchStatus(listed, nodeName, label("kube-reclaim.io/pool", "batch"), metav1.PatchOptions{}))
		_, err = listed.CoreV1().Nodes().Create(ctx, withKeys("admin-made"), dryCreate)
		mustAllow(t, "listed admin node created with the keys", err)
		if node, err = admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if node.Labels[oversell] != "1.5" || node.Labels["kube-reclaim.io/pool"] != "batch" {
			t.Errorf("listed admin's labels not stored: %v", node.Labels)
		}
		mustAllow(t, "listed admin removes the ratio", patchNode(listed, nodeName, []byte(`{"metadata":{"labels":{"`+oversell+`":null}}}`), metav1.PatchOptions{}))
	})

	t.Run("each account creates only its own Lease or Secret", func(t *testing.T) {
		sched := impersonate(t, c, schedulerSA)
		createSecret := func(cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Secrets("kube-reclaim").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, dryCreate)
			return err
		}
		// Refused by the policy, not by RBAC (which grants create on any
		// name in the namespace).
		mustDenyBy(t, "publisher creates the scheduler's Lease", createLease(pub, "kube-reclaim-scheduler", dryCreate), "kube-reclaim-own-objects")
		mustDenyBy(t, "publisher creates another Lease", createLease(pub, "anything", dryCreate), "kube-reclaim-own-objects")
		mustDenyBy(t, "scheduler creates the publisher's Lease", createLease(sched, "kube-reclaim-publisher", dryCreate), "kube-reclaim-own-objects")
		mustDenyBy(t, "webhook creates another Secret", createSecret(wh, "kube-reclaim-metrics-scraper-token"), "kube-reclaim-own-objects")
		// Positive controls: each its own.
		mustAllow(t, "publisher creates its Lease", createLease(pub, "kube-reclaim-publisher", dryCreate))
		mustAllow(t, "scheduler creates its Lease", createLease(sched, "kube-reclaim-scheduler", dryCreate))
		mustAllow(t, "webhook creates its CA Secret", createSecret(wh, "kube-reclaim-webhook-ca"))
	})

	t.Run("the webhook changes only the caBundle of its configuration", func(t *testing.T) {
		mustDenyBy(t, "webhook rules", rulesChanged(), "kube-reclaim-webhook-configuration")
		cfg, err := wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "kube-reclaim-webhook", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		url := "https://attacker.example:443/"
		byURL := cfg.DeepCopy()
		byURL.Webhooks[0].ClientConfig.Service, byURL.Webhooks[0].ClientConfig.URL = nil, &url
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, byURL, metav1.UpdateOptions{})
		mustDenyBy(t, "webhook clientConfig", err, "kube-reclaim-webhook-configuration")
		ignore := admissionregistrationv1.Ignore
		lax := cfg.DeepCopy()
		lax.Webhooks[1].FailurePolicy = &ignore
		_, err = wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, lax, metav1.UpdateOptions{})
		mustDenyBy(t, "webhook failurePolicy", err, "kube-reclaim-webhook-configuration")
		// Positive control: what --self-signed does.
		ca := cfg.DeepCopy()
		for i := range ca.Webhooks {
			ca.Webhooks[i].ClientConfig.CABundle = c.CA().CertPEM
		}
		got, err := wh.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, ca, metav1.UpdateOptions{})
		mustAllow(t, "webhook caBundle", err)
		if err == nil && string(got.Webhooks[1].ClientConfig.CABundle) != string(c.CA().CertPEM) {
			t.Error("caBundle not stored")
		}
	})

	t.Run("the scheduler's account may renew its own Lease only", func(t *testing.T) {
		sar := func(ns, name, verb, group, resource string) bool {
			t.Helper()
			res, sub, _ := strings.Cut(resource, "/")
			r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: schedulerSA, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-reclaim", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r.Status.Allowed
		}
		if !sar("kube-reclaim", "kube-reclaim-scheduler", "update", "coordination.k8s.io", "leases") {
			t.Error("the scheduler may not update its own Lease kube-reclaim/kube-reclaim-scheduler")
		}
		for _, verb := range []string{"get", "update"} {
			if sar("kube-system", "kube-scheduler", verb, "coordination.k8s.io", "leases") {
				t.Errorf("the scheduler may %s the default scheduler's Lease kube-system/kube-scheduler", verb)
			}
		}
		if sar("default", "some-pod", "delete", "", "pods") {
			t.Error("the scheduler may delete pods (preemption is off)")
		}
		// The extender sidecar binds with the same account.
		if !sar("default", "some-pod", "create", "", "pods/binding") {
			t.Error("the scheduler's account may not create pods/binding")
		}
	})
}

// createObject creates obj for real as admin, through the dynamic client.
func createObject(t *testing.T, c *cluster.Cluster, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	res := map[string]string{
		"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "Role": "roles", "ClusterRole": "clusterroles",
		"RoleBinding": "rolebindings", "ClusterRoleBinding": "clusterrolebindings",
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
	}[gvk.Kind]
	if res == "" {
		t.Fatalf("no resource for %s", gvk.Kind)
	}
	var err error
	if ns := obj.GetNamespace(); ns != "" {
		_, err = c.Dynamic.Resource(gvk.GroupVersion().WithResource(res)).Namespace(ns).Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{})
	} else {
		_, err = c.Dynamic.Resource(gvk.GroupVersion().WithResource(res)).Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

func admissionPolicyNames(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			out = append(out, o.GetName())
		}
	}
	return out
}

func mustNodeConfig(t *testing.T, c *cluster.Cluster, node string) *rest.Config {
	t.Helper()
	cfg, err := c.NodeRESTConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// impersonate is a client acting as the ServiceAccount user (its groups
// included, as a token of it would carry).
func impersonate(t *testing.T, c *cluster.Cluster, user string) kubernetes.Interface {
	t.Helper()
	cfg := c.RESTConfig()
	ns := strings.Split(user, ":")[2]
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return clientFor(t, cfg)
}

// impersonateUser is a client acting as a user that is no ServiceAccount.
func impersonateUser(t *testing.T, c *cluster.Cluster, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return clientFor(t, cfg)
}

// statusFields is a Node's status as JSON, field by field.
func statusFields(t *testing.T, n *corev1.Node) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(n.Status)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// deniedBy reports whether err is the refusal of the named policy (and not
// of RBAC, NodeRestriction or anything else).
func deniedBy(err error, policy string) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// mustDenyBy fails unless err is a refusal by one of the named policies.
func mustDenyBy(t *testing.T, what string, err error, policies ...string) {
	t.Helper()
	for _, policy := range policies {
		if deniedBy(err, policy) {
			return
		}
	}
	t.Errorf("%s: %v, want refused by ValidatingAdmissionPolicy %s", what, err, strings.Join(policies, " or "))
}

func mustAllow(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s refused: %v", what, err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
