package kubectlreclaim

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// rewrittenPod is a pod as the webhook stores it after profile "spark"
// rewrote app (500m, 1Gi) and init (1, 64Mi) and enforced the grant.
func rewrittenPod() *corev1.Pod {
	p := pod("batch", "spark-1", "node-a", "500", "1Gi", corev1.PodRunning)
	p.Labels[testNames.ReclaimedLabel] = "true"
	p.Annotations = map[string]string{
		testNames.Profile:        "spark",
		testNames.ProfileRewrite: `{"app":{"cpuMilli":500,"memoryBytes":1073741824},"init":{"cpuMilli":1000,"memoryBytes":67108864}}`,
	}
	p.Spec.Containers[0].Name = "app"
	r := &p.Spec.Containers[0].Resources
	r.Limits[corev1.ResourceCPU], r.Limits[corev1.ResourceMemory] = mustQuantity("500m"), mustQuantity("1Gi")
	r.Requests[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory] = mustQuantity("0"), mustQuantity("0")
	init := corev1.Container{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("0"), corev1.ResourceMemory: mustQuantity("0"),
			testNames.CPU: mustQuantity("1000"), testNames.Memory: mustQuantity("64Mi")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1"), corev1.ResourceMemory: mustQuantity("64Mi"),
			testNames.CPU: mustQuantity("1000"), testNames.Memory: mustQuantity("64Mi")},
	}}
	p.Spec.InitContainers = []corev1.Container{init}
	prio := int32(-10)
	p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.SchedulerName = "batch-low", &prio, "kube-reclaim-scheduler"
	return p
}

func profileWorld() world {
	broken := pod("batch", "broken", "node-a", "100", "64Mi", corev1.PodRunning)
	broken.Annotations = map[string]string{testNames.Profile: "spark", testNames.ProfileRewrite: "app=100m"}
	return world{objects: []runtime.Object{rewrittenPod(), broken, pod("batch", "own", "node-a", "250", "256Mi", corev1.PodRunning)}}
}

func TestPodsShowWhichProfileRewroteWhat(t *testing.T) {
	out, _, err := run(t, profileWorld(), "pods", "-n", "batch", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      NODE     CPU    MEMORY   PHASE     AGE   PROFILE   MESSAGE                                                                                                                             SCHEDULER                REWRITTEN\n" +
		"broken    node-a   100m   64Mi     Running   5m    spark     kube-reclaim.io/profile-rewrite: annotation is not a profile rewrite record: invalid character 'a' looking for beginning of value   default-scheduler        <none>\n" +
		"own       node-a   250m   256Mi    Running   5m    <none>                                                                                                                                        default-scheduler        <none>\n" +
		"spark-1   node-a   1      1Gi      Running   5m    spark                                                                                                                                         kube-reclaim-scheduler   app=500m/1Gi,init=1/64Mi\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = run(t, profileWorld(), "pods", "-n", "batch", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	spark := list.Items[2]
	if spark.Profile != "spark" || spark.Rewritten["init"] != res(1000, 64<<20) || spark.Rewritten["app"] != res(500, 1<<30) {
		t.Errorf("json row %+v", spark)
	}
	if list.Items[1].Profile != "" || list.Items[1].Rewritten != nil {
		t.Errorf("a pod no profile rewrote: %+v", list.Items[1])
	}
}

func TestExplainPodShowsTheProfileTheRewriteAndTheEnforcement(t *testing.T) {
	out, _, err := run(t, profileWorld(), "explain", "pod/spark-1", "-n", "batch")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Pod:         batch/spark-1\n" +
		"Profile:     spark: its native cpu/memory requests were rewritten into reclaimed requests\n" +
		"Rewritten:   app: cpu 500m, memory 1Gi\n" +
		"             init: cpu 1, memory 64Mi\n" +
		"Reclaimed:   cpu 1, memory 1Gi (the pod's effective request)\n" +
		"Enforced:    yes: native limits are the grant, native requests explicit (kubelet caps CPU and memory)\n" +
		"Scheduler:   kube-reclaim-scheduler\n" +
		"Priority:    -10 (class batch-low)\n" +
		"Containers:  init (init): requests cpu 0, memory 0, reclaimed-cpu 1, reclaimed-memory 64Mi; limits cpu 1, memory 64Mi, reclaimed-cpu 1, reclaimed-memory 64Mi\n" +
		"             app: requests cpu 0, memory 0, reclaimed-cpu 500m, reclaimed-memory 1Gi; limits cpu 500m, memory 1Gi, reclaimed-cpu 500m, reclaimed-memory 1Gi\n"
	if out != want {
		t.Errorf("explain:\n%s\nwant:\n%s", out, want)
	}

	// A pod that asks for reclaimed resources itself, without limits: not enforced, and why.
	out, _, err = run(t, profileWorld(), "explain", "pods/own", "-n", "batch")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Profile:     <none>: the pod requests reclaimed resources itself", "Enforced:    NO: "} {
		if !strings.Contains(out, s) {
			t.Errorf("explain own split does not say %q:\n%s", s, out)
		}
	}

	out, _, err = run(t, profileWorld(), "explain", "pod/spark-1", "-n", "batch", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r PodExplainReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != "PodExplanation" || r.Profile != "spark" || !r.OptedIn || !r.Enforced || len(r.Containers) != 2 || *r.Priority != -10 {
		t.Errorf("json %+v", r)
	}
	if _, _, err := run(t, profileWorld(), "explain", "pod/missing", "-n", "batch"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a missing pod: %v", err)
	}
}
