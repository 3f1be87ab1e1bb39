package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// The three nodes the publisher and simulate tests read: 16 cores and 64 GiB
// each. Node 0 runs a regular pod using 2 cores / 4 GiB, node 1 one using 6
// cores / 1 GiB, node 2 one using 1 core / 1 GiB beside a reclaimed pod.
// Every regular pod requests 1 core / 1 GiB.
const usedNodeCPU, usedNodeMem = 16000, 64 << 30

// regularUsage is what the regular pods of node i use, millicores and bytes.
var regularUsage = [3][2]int64{{2000, 4 << 30}, {6000, 1 << 30}, {1000, 1 << 30}}

// usedNodes says what differs between the tests that use the three nodes.
type usedNodes struct {
	nodePrefix string // the nodes' name prefix
	podPrefix  string // the pods are <podPrefix>reg-0, reg-1, rec-2 and reg-2, in default
	// The reclaimed pod of node 2: the reclaimed CPU millicores and memory it
	// is granted, and what it uses.
	grantCPU, grantMem string
	useCPU, useMem     string
}

// start starts a cluster with opts, adds the three ready nodes, creates the
// pods and sets their usage; it returns the cluster and the node names.
func (u usedNodes) start(t *testing.T, opts cluster.Options) (*cluster.Cluster, []string) {
	t.Helper()
	c := cluster.StartForTest(t, opts)
	spec := cluster.NodeSpec{NamePrefix: u.nodePrefix, CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}
	nodes := framework.AddReadyNodes(t, c, 3, spec, time.Minute)
	regular := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	grant := corev1.ResourceList{names.CPU: resource.MustParse(u.grantCPU), names.Memory: resource.MustParse(u.grantMem)}
	for _, p := range []struct {
		name, node          string
		requests, reclaimed corev1.ResourceList
		cpu, mem            string
	}{
		{"reg-0", nodes[0], regular, nil, "2", "4Gi"},
		{"reg-1", nodes[1], regular, nil, "6", "1Gi"},
		{"rec-2", nodes[2], nil, grant, u.useCPU, u.useMem},
		{"reg-2", nodes[2], regular, nil, "1", "1Gi"},
	} {
		framework.CreatePod(t, c, podSpec("default", u.podPrefix+p.name, p.node, p.requests, p.reclaimed))
		if err := c.SetPodUsage(context.Background(), "default", u.podPrefix+p.name, p.cpu, p.mem); err != nil {
			t.Fatal(err)
		}
	}
	return c, nodes
}
