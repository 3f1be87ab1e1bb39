package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// realNodeName is the node DEMO_REAL_NODE=1 adds.
const realNodeName = "real-0"

// realNode adds a kubelet with its own containerd beside the kwok nodes,
// waits until the publisher publishes room on it (measured from this
// machine's real usage through metrics-server), and schedules a batch pod
// onto it through the extender: a container that really runs and burns CPU.
func (d *demo) realNode(ctx context.Context) error {
	d.step("DEMO_REAL_NODE is set: adding %s, a real kubelet v1.34.4 with its own containerd and runc (needs root)", realNodeName)
	if _, err := d.c.AddRealNode(ctx, realNodeName, cluster.RealNodeSpec{}); err != nil {
		return err
	}
	d.step("%s Ready; waiting for metrics-server to scrape its kubelet and the publisher to publish room on it", realNodeName)
	const cpu, mem = 100, 128 << 20
	var a reclaimable.Annotation
	deadline := time.Now().Add(4 * time.Minute)
	for {
		node, err := d.c.Client.CoreV1().Nodes().Get(ctx, realNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a, err = reclaimable.Parse(node.Annotations[names.Annotation])
		if err == nil && a.ZeroReason == "" && a.CPUMilli >= cpu && a.MemoryBytes >= mem {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("no room of %dm / %d MiB published on %s within 4 minutes (the machine may be too busy): %w", cpu, mem>>20, realNodeName, err)
			}
			return fmt.Errorf("no room of %dm / %d MiB published on %s within 4 minutes (annotation %+v): the machine may be too busy", cpu, mem>>20, realNodeName, a)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	d.step("%s publishes %dm CPU and %s of reclaimable memory", realNodeName, a.CPUMilli, gib(a.MemoryBytes))
	pod := batchPod("real-batch", cpu, mem)
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: realNodeName}
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = cluster.WorkloadImage, corev1.PullNever
	c.Env = []corev1.EnvVar{{Name: "BURN_MILLICORES", Value: fmt.Sprint(cpu)}, {Name: "ALLOCATE_MIB", Value: "64"}}
	pod.Spec.AutomountServiceAccountToken = new(bool)
	if _, err := d.c.Client.CoreV1().Pods(batchNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		p, err := d.c.Client.CoreV1().Pods(batchNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodRunning {
			d.step("batch pod %s (requests = limits = %dm reclaimed CPU, %d MiB reclaimed memory) is Running on %s, bound by the extender: container %s started with orders to burn %dm and hold 64 MiB (not measured here)",
				p.Name, cpu, mem>>20, p.Spec.NodeName, p.Status.ContainerStatuses[0].ContainerID, cpu)
			return nil
		}
		if p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			return fmt.Errorf("batch pod on %s: phase %s, reason %q: %s", realNodeName, p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
