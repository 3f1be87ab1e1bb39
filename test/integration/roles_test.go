package integration

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

func TestMain(m *testing.M) {
	code := m.Run()
	framework.RemoveBinary()
	os.Exit(code)
}

var names = framework.Names

// view reads a node; the tests here judge annotations with the readers'
// default --stale-after.
func view(t *testing.T, c *cluster.Cluster, node string) framework.NodeView {
	t.Helper()
	return framework.View(t, c, node, 10*time.Minute)
}

// podSpec is a pod bound directly to node (no scheduler involved).
func podSpec(ns, name, node string, requests, reclaimed corev1.ResourceList) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range requests {
		res.Requests[k] = v
	}
	for k, v := range reclaimed {
		res.Requests[k] = v
		res.Limits[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: res}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}
}
