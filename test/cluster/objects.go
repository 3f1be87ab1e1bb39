package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// ResourceUsageGVR is kwok's per-pod usage object.
	ResourceUsageGVR        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "resourceusages"}
	clusterResourceUsageGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterresourceusages"}
	apiServiceGVR           = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

func (c *Cluster) installKwokCRDs(ctx context.Context) error {
	for _, file := range c.bins.KwokCRDs {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if _, err := c.Dynamic.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
		}
	}
	// kwok must find the CRDs served when it starts, and the default usage
	// object must exist before pods appear.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Dynamic.Resource(clusterResourceUsageGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kwok CRDs not served: %w", err)
	}
	def := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterResourceUsage",
		"metadata": map[string]interface{}{"name": "default-usage"},
		"spec": map[string]interface{}{"usages": []interface{}{map[string]interface{}{"usage": map[string]interface{}{
			"cpu":    map[string]interface{}{"value": DefaultPodUsageCPU},
			"memory": map[string]interface{}{"value": DefaultPodUsageMemory},
		}}}},
	}}
	if _, err := c.Dynamic.Resource(clusterResourceUsageGVR).Create(ctx, def, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating default ClusterResourceUsage: %w", err)
	}
	return nil
}

// registerMetricsAPI points metrics.k8s.io at the local metrics-server. The
// apiserver refuses loopback Endpoints, so the Service is an ExternalName
// for localhost and the serving certificate names <svc>.<ns>.svc.
func (c *Cluster) registerMetricsAPI(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(c.metricsPort), TargetPort: intstr.FromInt32(int32(c.metricsPort))}}},
	}
	if _, err := c.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating metrics-server Service: %w", err)
	}
	api := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]interface{}{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]interface{}{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"caBundle": c.ca.CertPEM,
			"service":  map[string]interface{}{"namespace": "kube-system", "name": "metrics-server", "port": int64(c.metricsPort)},
		},
	}}
	if _, err := c.Dynamic.Resource(apiServiceGVR).Create(ctx, api, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating metrics APIService: %w", err)
	}
	return nil
}

// NodeSpec describes kwok nodes to add.
type NodeSpec struct {
	// NamePrefix names nodes <prefix>-<index> (default "kwok-node").
	NamePrefix string
	// StartIndex is the index of the first node.
	StartIndex int
	// CPU and Memory are capacity and allocatable (default 32 cores, 128Gi).
	CPU, Memory resource.Quantity
	// Pods is the pod capacity (default 110).
	Pods        int64
	Labels      map[string]string
	Annotations map[string]string
	Taints      []corev1.Taint
}

// NodeName returns the name AddNodes gives node i of spec.
func (s NodeSpec) NodeName(i int) string {
	prefix := s.NamePrefix
	if prefix == "" {
		prefix = "kwok-node"
	}
	return fmt.Sprintf("%s-%d", prefix, s.StartIndex+i)
}

// Node builds node i of the spec, managed by kwok and scraped by metrics-server.
func (s NodeSpec) Node(i int) *corev1.Node {
	name := s.NodeName(i)
	cpu, mem, pods := s.CPU, s.Memory, s.Pods
	if cpu.IsZero() {
		cpu = resource.MustParse("32")
	}
	if mem.IsZero() {
		mem = resource.MustParse("128Gi")
	}
	if pods == 0 {
		pods = 110
	}
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		"kubernetes.io/arch": "amd64", "type": "kwok"}
	for k, v := range s.Labels {
		labels[k] = v
	}
	ann := map[string]string{
		"kwok.x-k8s.io/node":                   "fake",
		"node.alpha.kubernetes.io/ttl":         "0",
		"metrics.k8s.io/resource-metrics-path": "/metrics/nodes/" + name + "/metrics/resource",
	}
	for k, v := range s.Annotations {
		ann[k] = v
	}
	res := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem,
		corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann},
		Spec:       corev1.NodeSpec{Taints: s.Taints},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
}

// AddNodes creates n kwok nodes concurrently and returns their names. It does
// not wait for them to become Ready (see WaitNodesReady).
func (c *Cluster) AddNodes(ctx context.Context, n int, spec NodeSpec) ([]string, error) {
	names := make([]string, n)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		node := spec.Node(i)
		names[i] = node.Name
		g.Go(func() error {
			if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating node %s: %w", node.Name, err)
			}
			return nil
		})
	}
	return names, g.Wait()
}

// NodeReady reports whether a node is Ready and no longer carries the
// not-ready taint, i.e. schedulable as a real node would be.
func NodeReady(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready && !n.Spec.Unschedulable
}

// WaitNodesReady waits until every named node is Ready without not-ready taints.
func (c *Cluster) WaitNodesReady(ctx context.Context, names []string, timeout time.Duration) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var notReady int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil //nolint:nilerr // keep polling through transient errors
		}
		ready := 0
		for i := range list.Items {
			if want[list.Items[i].Name] && NodeReady(&list.Items[i]) {
				ready++
			}
		}
		notReady = len(want) - ready
		return notReady == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d nodes not ready: %w", notReady, len(names), err)
	}
	return nil
}

// SetPodUsage makes kwok report this CPU and memory usage for a pod (through a
// kwok ResourceUsage named like the pod); metrics-server picks it up on its
// next scrapes. cpu and memory are quantities such as "2" and "4Gi".
func (c *Cluster) SetPodUsage(ctx context.Context, namespace, pod, cpu, memory string) error {
	for _, q := range []string{cpu, memory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("usage %q: %w", q, err)
		}
	}
	spec := map[string]interface{}{"usages": []interface{}{map[string]interface{}{"usage": map[string]interface{}{
		"cpu": map[string]interface{}{"value": cpu}, "memory": map[string]interface{}{"value": memory},
	}}}}
	ru := c.Dynamic.Resource(ResourceUsageGVR).Namespace(namespace)
	existing, err := ru.Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ResourceUsage",
			"metadata": map[string]interface{}{"name": pod, "namespace": namespace},
			"spec":     spec,
		}}
		_, err = ru.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	existing.Object["spec"] = spec
	_, err = ru.Update(ctx, existing, metav1.UpdateOptions{})
	return err
}
