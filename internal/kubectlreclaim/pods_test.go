package kubectlreclaim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

func failedScheduling(p *corev1.Pod, name, message string, ago time.Duration) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: p.Namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         "FailedScheduling",
		Type:           corev1.EventTypeWarning,
		Message:        message,
		LastTimestamp:  metav1.NewTime(now.Add(-ago)),
	}
}

// podsWorld has reclaimed pods in two namespaces, a regular pod, and three
// unbound reclaimed pods: one with FailedScheduling events, one with only a
// PodScheduled condition, one the scheduler has not looked at.
func podsWorld() world {
	withEvents := pod("batch", "big", "", "8000", "8Gi", corev1.PodPending)
	conditionOnly := pod("batch", "cond", "", "100", "", corev1.PodPending)
	conditionOnly.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/3 nodes are available:\n3 Insufficient kube-reclaim.io/reclaimed-cpu."}}
	unseen := pod("ml", "fresh", "", "250", "256Mi", corev1.PodPending)
	unseen.Spec.SchedulerName = "kube-reclaim-scheduler"
	mismatch := pod("ml", "bad", "node-a", "500", "", corev1.PodRunning)
	mismatch.Spec.Containers[0].Resources.Limits[testNames.CPU] = mustQuantity("1000")
	return world{objects: []runtime.Object{
		pod("batch", "train-1", "node-a", "1000", "1Gi", corev1.PodRunning),
		pod("batch", "done", "node-a", "2000", "2Gi", corev1.PodSucceeded),
		pod("batch", "web", "node-a", "", "", corev1.PodRunning),
		withEvents, conditionOnly, unseen, mismatch,
		failedScheduling(withEvents, "big.1", "0/2 nodes are available: 2 node(s) had no reclaimed room (extender)", 2*time.Minute),
		failedScheduling(withEvents, "big.2", "0/2 nodes are available: 1 Insufficient kube-reclaim.io/reclaimed-memory, 1 node(s) had stale reclaimable annotation.", 10*time.Second),
		failedScheduling(withEvents, "big.0", "older", 4*time.Minute),
	}}
}

func TestPodsAllNamespacesShowsWhereTheyRunAndWhyTheyWait(t *testing.T) {
	out, errOut, err := run(t, podsWorld(), "pods", "-A")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAMESPACE   NAME      NODE     CPU    MEMORY   PHASE       AGE   PROFILE   MESSAGE\n" +
		"batch       big       <none>   8      8Gi      Pending     5m    <none>    0/2 nodes are available: 1 Insufficient kube-reclaim.io/reclaimed-memory, 1 node(s) had stale reclaimable annotation.\n" +
		"batch       cond      <none>   100m   0        Pending     5m    <none>    0/3 nodes are available: 3 Insufficient kube-reclaim.io/reclaimed-cpu.\n" +
		"batch       done      node-a   2      2Gi      Succeeded   5m    <none>    \n" +
		"batch       train-1   node-a   1      1Gi      Running     5m    <none>    \n" +
		"ml          bad       node-a   500m   0        Running     5m    <none>    reclaimed requests differ from limits: the pod cannot use reclaimed capacity\n" +
		"ml          fresh     <none>   250m   256Mi    Pending     5m    <none>    no scheduling attempt recorded yet; is the scheduler \"kube-reclaim-scheduler\" running?\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
}

func TestPodsInOneNamespaceDropTheNamespaceColumn(t *testing.T) {
	out, _, err := run(t, podsWorld(), "pods", "-n", "ml")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME    NODE     CPU    MEMORY   PHASE     AGE   PROFILE   MESSAGE\n" +
		"bad     node-a   500m   0        Running   5m    <none>    reclaimed requests differ from limits: the pod cannot use reclaimed capacity\n" +
		"fresh   <none>   250m   256Mi    Pending   5m    <none>    no scheduling attempt recorded yet; is the scheduler \"kube-reclaim-scheduler\" running?\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
}

func TestPodsSelectorAndEmptyResult(t *testing.T) {
	out, errOut, err := run(t, podsWorld(), "pods", "-n", "batch", "-l", "app=web")
	if err != nil {
		t.Fatal(err)
	}
	if out != "" || errOut != "No reclaimed pods found in namespace batch.\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	out, _, err = run(t, podsWorld(), "pods", "-A", "-l", "app=train-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := firstColumn(out); strings.Join(got, " ") != "batch" || !strings.Contains(out, "train-1") {
		t.Errorf("selector output:\n%s", out)
	}
}

func TestPodsJSONCarriesExactRequests(t *testing.T) {
	out, _, err := run(t, podsWorld(), "pods", "-n", "batch", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(list.Items) != 4 {
		t.Fatalf("%d pods, want 4:\n%s", len(list.Items), out)
	}
	big, train := list.Items[0], list.Items[3]
	if big.Name != "big" || big.Node != "" || big.Phase != "Pending" || big.Requested != (res(8000, 8<<30)) ||
		!strings.Contains(big.Waiting, "1 node(s) had stale reclaimable annotation") {
		t.Errorf("big %+v", big)
	}
	if train.Name != "train-1" || train.Node != "node-a" || train.Phase != "Running" || train.Requested != (res(1000, 1<<30)) || train.Waiting != "" {
		t.Errorf("train-1 %+v", train)
	}
}

func TestPodsWideAddsTheSchedulerAndNoHeadersDropsTheHeader(t *testing.T) {
	out, _, err := run(t, podsWorld(), "pods", "-n", "ml", "-o", "wide", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"bad     node-a   500m   0       Running   5m    <none>   reclaimed requests differ from limits: the pod cannot use reclaimed capacity             default-scheduler        <none>\n" +
		"fresh   <none>   250m   256Mi   Pending   5m    <none>   no scheduling attempt recorded yet; is the scheduler \"kube-reclaim-scheduler\" running?   kube-reclaim-scheduler   <none>\n"
	if out != want {
		t.Errorf("wide table:\n%s\nwant:\n%s", out, want)
	}
}

func TestPodsOutputNameListsPodsLikeKubectl(t *testing.T) {
	out, _, err := run(t, podsWorld(), "pods", "-A", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	// Namespace first, then name; the regular pod "web" is not listed.
	if want := "pod/big\npod/cond\npod/done\npod/train-1\npod/bad\npod/fresh\n"; out != want {
		t.Errorf("-o name:\n%s\nwant:\n%s", out, want)
	}
}

// pagedPods serves pod lists in pages of the request's limit, with
// continue tokens, and records the limit of every request.
func pagedPods(w world, limits *[]int64) func(clienttesting.Action) (bool, runtime.Object, error) {
	var pods []corev1.Pod
	for _, o := range w.objects {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, *p)
		}
	}
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts := a.(clienttesting.ListActionImpl).ListOptions
		*limits = append(*limits, opts.Limit)
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(pods)
		if opts.Limit > 0 {
			end = min(start+int(opts.Limit), len(pods))
		}
		list := &corev1.PodList{Items: pods[start:end]}
		if end < len(pods) {
			list.Continue = strconv.Itoa(end)
		}
		return true, list, nil
	}
}

func TestPodListsFollowEveryPage(t *testing.T) {
	tests := []struct {
		args      []string
		wantPages int
	}{
		{args: []string{"pods", "-A", "-o", "name", "--chunk-size", "2"}, wantPages: 4}, // 7 pods
		{args: []string{"pods", "-A", "-o", "name", "--chunk-size", "0"}, wantPages: 1},
		{args: []string{"pods", "-A", "-o", "name"}, wantPages: 1}, // default 500
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			w := podsWorld()
			var limits []int64
			w.reactors = map[string]clienttesting.ReactionFunc{"pods": pagedPods(w, &limits)}
			out, _, err := run(t, w, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if want := "pod/big\npod/cond\npod/done\npod/train-1\npod/bad\npod/fresh\n"; out != want {
				t.Errorf("-o name:\n%s\nwant:\n%s", out, want)
			}
			if len(limits) != tt.wantPages {
				t.Errorf("%d list requests (limits %v), want %d", len(limits), limits, tt.wantPages)
			}
		})
	}
}
