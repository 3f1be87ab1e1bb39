package kubectlreclaim

import (
	"bytes"
	"context"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// runUninstall runs `kubectl reclaim uninstall args...` against a fake
// holding objects and returns the fake, to read the nodes afterwards.
func runUninstall(t *testing.T, objects []runtime.Object, args ...string) (*fake.Clientset, string, error) {
	t.Helper()
	kube := fake.NewClientset(objects...)
	var out bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &bytes.Buffer{}})
	o.Now = func() time.Time { return now }
	o.NewClients = func() (Clients, error) { return Clients{Kube: kube}, nil }
	cmd := NewCommand(o)
	cmd.SetArgs(append([]string{"uninstall"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return kube, out.String(), err
}

func nodeStatusWebhook(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "nodes." + name, Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes/status"}},
		}}}},
	}
}

// leftovers is what kube-reclaim left on two of three nodes, and pods of
// every kind.
func leftovers() []runtime.Object {
	statusOnly := bareNode("node-c")
	statusOnly.Status.Capacity[testNames.CPU] = resource.MustParse("1000")
	return []runtime.Object{
		annotated("node-a", reclaimable.Annotation{CPUMilli: 2000, MemoryBytes: 4 << 30, WriteTime: now}, reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 4 << 30}),
		bareNode("node-b"),
		statusOnly,
		pod("batch", "running", "node-a", "500", "1Gi", corev1.PodRunning),
		pod("batch", "pending", "", "500", "1Gi", corev1.PodPending),
		pod("batch", "done", "node-a", "500", "1Gi", corev1.PodSucceeded),
		pod("web", "regular", "node-a", "", "", corev1.PodRunning),
	}
}

func TestUninstallRefusesWhileKubeReclaimRuns(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		want    string
	}{
		{"the publisher renewed its Lease", []runtime.Object{publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, time.Second)},
			"the publisher's Lease kube-reclaim/kube-reclaim-publisher is alive"},
		{"a webhook mutates nodes/status", []runtime.Object{nodeStatusWebhook("kube-reclaim-webhook")},
			"MutatingWebhookConfiguration kube-reclaim-webhook mutates nodes/status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube, out, err := runUninstall(t, append(leftovers(), tt.objects...))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "kubectl delete -k") {
				t.Fatalf("error %v, want one naming %q and kubectl delete -k; output:\n%s", err, tt.want, out)
			}
			n, err := kube.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, left := leftOn(n, testNames); !left {
				t.Error("node-a was cleaned although uninstall refused")
			}
		})
	}
}

func TestUninstallRemovesTheAnnotationAndReclaimedResourcesFromEveryNode(t *testing.T) {
	tests := []struct {
		name      string
		extra     []runtime.Object
		args      []string
		wantClean bool
		wantOut   []string
	}{
		{"after kubectl delete -k", []runtime.Object{publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, time.Hour)}, nil, true,
			[]string{"node/node-a cleaned: annotation, kube-reclaim.io/reclaimed-cpu, kube-reclaim.io/reclaimed-memory\n",
				"node/node-c cleaned: kube-reclaim.io/reclaimed-cpu\n", "cleaned 2 of 3 nodes\n",
				"1 pods still run on reclaimed resources", "  batch/running\n"}},
		{"forced while a webhook is registered", []runtime.Object{nodeStatusWebhook("kube-reclaim-webhook")}, []string{"--force"}, true,
			[]string{"cleaned 2 of 3 nodes\n"}},
		{"dry run", nil, []string{"--dry-run"}, false,
			[]string{"node/node-a would clean: annotation, kube-reclaim.io/reclaimed-cpu, kube-reclaim.io/reclaimed-memory\n", "would clean 2 of 3 nodes\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube, out, err := runUninstall(t, append(leftovers(), tt.extra...), tt.args...)
			if err != nil {
				t.Fatalf("uninstall: %v\n%s", err, out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, name := range []string{"node-a", "node-b", "node-c"} {
				n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				un, left := leftOn(n, testNames)
				// node-b never carried anything.
				if wantLeft := !tt.wantClean && name != "node-b"; left != wantLeft {
					t.Errorf("%s: left %+v, want something left: %v", name, un, wantLeft)
				}
				if n.Status.Capacity.Cpu().IsZero() || n.Status.Allocatable.Memory().IsZero() {
					t.Errorf("%s: native resources touched: %v", name, n.Status)
				}
			}
		})
	}
}
