package extender

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRecordKeepsOnlyWhatIsNeeded(t *testing.T) {
	p := pod("p", "n1", 1500, 2*gi)
	initRes := corev1.ResourceList{testNames.CPU: *resource.NewQuantity(3000, resource.DecimalSI), testNames.Memory: *resource.NewQuantity(gi, resource.BinarySI)}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: initRes, Limits: initRes.DeepCopy()}}}
	p.Labels = map[string]string{"big": "label"}
	enforced(p)
	p.ResourceVersion = "5"
	got := podRecords(testNames)(p)
	want := &podRecord{namespace: "batch", name: "p", uid: "uid-p", resourceVersion: "5", nodeName: "n1", schedulerName: SchedulerName, req: req(3000, 2*gi)}
	if r := got.(*podRecord); *r != *want {
		t.Errorf("record = %+v, want %+v", *r, *want)
	}
	// Idempotent: a record passes through unchanged.
	if again := podRecords(testNames)(got); again != got {
		t.Error("converting a record is not the identity")
	}
	if done := podRecords(testNames)(withPhase(pod("q", "n1", 1, 1), corev1.PodSucceeded)); !done.(*podRecord).terminal {
		t.Error("succeeded pod not marked terminal")
	}
	if bare := podRecords(testNames)(pod("q", "n1", 1, 1)); !strings.Contains(bare.(*podRecord).unenforced, `container "main": no explicit requests.cpu`) {
		t.Errorf("a pod without the webhook's limits: unenforced = %q, want what it lacks", bare.(*podRecord).unenforced)
	}
}
