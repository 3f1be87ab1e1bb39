package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const testProfiles = `
profiles:
- name: data
  namespaceSelector: {matchLabels: {team: data}}
  schedulerName: reclaim-scheduler
  priorityClassName: batch-low
- name: missing-class
  namespaceSelector: {matchLabels: {team: broken}}
  priorityClassName: no-such-class
- name: spark
  podSelector: {matchLabels: {app: spark}}
`

var testNamespaces = map[string]map[string]string{
	"data":   {"team": "data"},
	"web":    {"team": "web"},
	"broken": {"team": "broken"},
}

func mustConfig(t testing.TB, doc string) *policy.Config {
	t.Helper()
	cfg, _, err := policyfile.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newTestRewriter(t testing.TB, doc string) *ProfileRewriter {
	cfg := mustConfig(t, doc)
	never := corev1.PreemptNever
	return NewProfileRewriter(testNames, func() *policy.Config { return cfg },
		func(name string) (map[string]string, error) {
			l, ok := testNamespaces[name]
			if !ok {
				return nil, errors.New(`namespace "` + name + `" not found`)
			}
			return l, nil
		},
		func(name string) (*schedulingv1.PriorityClass, error) {
			if name != "batch-low" {
				return nil, errors.New("no such PriorityClass")
			}
			return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: -10, PreemptionPolicy: &never}, nil
		}, nil)
}

// profilePod is a pod as the apiserver has it on CREATE after defaulting
// and the Priority admission plugin (priority 0, no class).
func profilePod(labels, annotations map[string]string, containers ...corev1.ResourceRequirements) *corev1.Pod {
	zero := int32(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{SchedulerName: "default-scheduler", Priority: &zero}}
	for i, r := range containers {
		c := corev1.Container{Name: []string{"app", "sidecar", "init"}[i], Image: "busybox", Resources: r}
		if i == 2 {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
			continue
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod
}

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

var optedIn = map[string]string{"kube-reclaim.io/reclaimed": "true", "app": "x"}

func TestProfileRewrite(t *testing.T) {
	const (
		rcpu = "kube-reclaim.io/reclaimed-cpu"
		rmem = "kube-reclaim.io/reclaimed-memory"
	)
	cpuMem := corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "1Gi")}
	tests := []struct {
		name      string
		namespace string
		pod       *corev1.Pod
		// wantResources per container (app, sidecar, init) after the rewrite;
		// nil: the pod must be unchanged.
		wantResources []corev1.ResourceRequirements
		wantProfile   string
		wantRewrite   string
		wantScheduler string
		wantPriority  int32
		wantDenied    []string
		wantResult    string
	}{
		{
			name: "an opted-in pod's native requests become reclaimed requests equal to limits", namespace: "web",
			pod: profilePod(map[string]string{"kube-reclaim.io/reclaimed": "true", "app": "spark"}, nil, cpuMem),
			wantResources: []corev1.ResourceRequirements{{
				Requests: rl(rcpu, "500", rmem, "1073741824"), Limits: rl(rcpu, "500", rmem, "1073741824")}},
			wantProfile: "spark", wantRewrite: `{"app":{"cpuMilli":500,"memoryBytes":1073741824}}`,
			wantScheduler: "default-scheduler", wantResult: ProfileRewritten,
		},
		{
			name: "every container kind is rewritten and other native resources and limits stay", namespace: "web",
			pod: profilePod(map[string]string{"kube-reclaim.io/reclaimed": "true", "app": "spark"}, nil,
				corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "2Gi", "ephemeral-storage", "1Gi"), Limits: rl("cpu", "4", "memory", "2Gi")},
				corev1.ResourceRequirements{Requests: rl("cpu", "0.1", "memory", "100M")},
				corev1.ResourceRequirements{Requests: rl("cpu", "1001m", "memory", "1")}),
			wantResources: []corev1.ResourceRequirements{
				{Requests: rl("ephemeral-storage", "1Gi", rcpu, "1000", rmem, "2147483648"), Limits: rl("cpu", "4", "memory", "2Gi", rcpu, "1000", rmem, "2147483648")},
				{Requests: rl(rcpu, "100", rmem, "100000000"), Limits: rl(rcpu, "100", rmem, "100000000")},
				{Requests: rl(rcpu, "1001", rmem, "1"), Limits: rl(rcpu, "1001", rmem, "1")},
			},
			wantProfile:   "spark",
			wantRewrite:   `{"app":{"cpuMilli":1000,"memoryBytes":2147483648},"init":{"cpuMilli":1001,"memoryBytes":1},"sidecar":{"cpuMilli":100,"memoryBytes":100000000}}`,
			wantScheduler: "default-scheduler", wantResult: ProfileRewritten,
		},
		{
			name: "the first matching profile wins and sets scheduler, class, priority and preemption", namespace: "data",
			pod: profilePod(map[string]string{"kube-reclaim.io/reclaimed": "true", "app": "spark"}, nil, cpuMem),
			wantResources: []corev1.ResourceRequirements{{
				Requests: rl(rcpu, "500", rmem, "1073741824"), Limits: rl(rcpu, "500", rmem, "1073741824")}},
			wantProfile: "data", wantRewrite: `{"app":{"cpuMilli":500,"memoryBytes":1073741824}}`,
			wantScheduler: "reclaim-scheduler", wantPriority: -10, wantResult: ProfileRewritten,
		},
		{
			name: "a pod without the opt-in label is left alone", namespace: "data",
			pod: profilePod(map[string]string{"app": "spark"}, nil, cpuMem),
		},
		{
			name: "the opt-in label must say true", namespace: "data",
			pod: profilePod(map[string]string{"kube-reclaim.io/reclaimed": "yes"}, nil, cpuMem),
		},
		{
			name: "the opt-out annotation keeps a labelled pod as it is", namespace: "data",
			pod:        profilePod(optedIn, map[string]string{"kube-reclaim.io/opt-out": "true"}, cpuMem),
			wantResult: ProfileOptedOut,
		},
		{
			name: "a labelled pod that already requests reclaimed resources keeps its own split", namespace: "data",
			pod: profilePod(optedIn, nil, corev1.ResourceRequirements{
				Requests: rl("cpu", "100m", rcpu, "1000", rmem, "1Gi"), Limits: rl(rcpu, "1000", rmem, "1Gi")}),
			wantResult: ProfileOwnSplit,
		},
		{
			name: "a labelled pod no profile selects is refused with what to do", namespace: "web",
			pod:        profilePod(optedIn, nil, cpuMem),
			wantDenied: []string{`no kube-reclaim profile selects it in namespace "web"`, "remove the label", `kube-reclaim.io/opt-out="true"`},
			wantResult: ProfileNoMatch,
		},
		{
			name: "a container without cpu or memory requests is refused, every one named", namespace: "web",
			pod: profilePod(map[string]string{"kube-reclaim.io/reclaimed": "true", "app": "spark"}, nil,
				corev1.ResourceRequirements{Requests: rl("cpu", "1")},
				corev1.ResourceRequirements{},
				corev1.ResourceRequirements{Requests: rl("memory", "1Gi", "cpu", "0")}),
			wantDenied: []string{`profile "spark" cannot run this pod on reclaimed capacity`,
				`init container "init" requests no cpu: add resources.requests.cpu`,
				`container "app" requests no memory: add resources.requests.memory`,
				`container "sidecar" requests no cpu or memory: add resources.requests.cpu and resources.requests.memory`},
			wantResult: ProfileDenied,
		},
		{
			name: "a profile naming a PriorityClass that does not exist refuses the pod", namespace: "broken",
			pod:        profilePod(optedIn, nil, cpuMem),
			wantDenied: []string{`profile "missing-class"`, `priorityClassName "no-such-class": no such PriorityClass`},
			wantResult: ProfileDenied,
		},
		{
			name: "an unknown namespace refuses the pod, to be retried", namespace: "new",
			pod:        profilePod(optedIn, nil, cpuMem),
			wantDenied: []string{`cannot read the labels of namespace "new"`, "retry"},
			wantResult: ProfileDenied,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRewriter(t, testProfiles)
			pod := tt.pod.DeepCopy()
			err := r.RewritePod(tt.namespace, pod)
			if tt.wantDenied != nil {
				if err == nil {
					t.Fatal("not denied")
				}
				for _, s := range tt.wantDenied {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("denial %q does not say %q", err, s)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantResources == nil {
				if !reflect.DeepEqual(pod, tt.pod) {
					t.Errorf("pod changed:\n got %+v\nwant %+v", pod, tt.pod)
				}
			} else {
				var got []corev1.ResourceRequirements
				for _, c := range pod.Spec.Containers {
					got = append(got, c.Resources)
				}
				for _, c := range pod.Spec.InitContainers {
					got = append(got, c.Resources)
				}
				if len(got) != len(tt.wantResources) {
					t.Fatalf("%d containers", len(got))
				}
				for i := range got {
					for _, l := range []struct{ got, want corev1.ResourceList }{{got[i].Requests, tt.wantResources[i].Requests}, {got[i].Limits, tt.wantResources[i].Limits}} {
						if len(l.got) != len(l.want) {
							t.Errorf("container %d: %v, want %v", i, l.got, l.want)
						}
						for k, v := range l.want {
							if g := l.got[k]; g.Cmp(v) != 0 {
								t.Errorf("container %d %s = %s, want %s", i, k, g.String(), v.String())
							}
						}
					}
				}
				if pod.Annotations[testNames.Profile] != tt.wantProfile || pod.Annotations[testNames.ProfileRewrite] != tt.wantRewrite {
					t.Errorf("annotations %v", pod.Annotations)
				}
				if pod.Spec.SchedulerName != tt.wantScheduler || *pod.Spec.Priority != tt.wantPriority {
					t.Errorf("scheduler %q priority %d", pod.Spec.SchedulerName, *pod.Spec.Priority)
				}
				if tt.wantPriority != 0 && (pod.Spec.PriorityClassName != "batch-low" || pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever) {
					t.Errorf("class %q preemption %v", pod.Spec.PriorityClassName, pod.Spec.PreemptionPolicy)
				}
				rec, err := reclaimable.ParseProfileRewrite(pod.Annotations[testNames.ProfileRewrite])
				if err != nil {
					t.Fatal(err)
				}
				// The record and the stored requests agree.
				if req, _ := testNames.PodRequest(pod); len(pod.Spec.InitContainers) == 0 && req != rec.Total() {
					t.Errorf("reclaimed request %+v, record total %+v", req, rec.Total())
				}
				// Idempotent: the rewriter's own result is left as it is.
				again := pod.DeepCopy()
				if err := r.RewritePod(tt.namespace, again); err != nil || !reflect.DeepEqual(again, pod) {
					t.Errorf("second rewrite changed the pod or failed: %v", err)
				}
			}
			if tt.wantResult != "" {
				profile := tt.wantProfile
				if tt.wantResult == ProfileDenied && tt.namespace == "web" {
					profile = "spark"
				} else if tt.wantResult == ProfileDenied && tt.namespace == "broken" {
					profile = "missing-class"
				}
				if got := testutil.ToFloat64(r.rewrites.WithLabelValues(profile, tt.wantResult)); got != 1 {
					t.Errorf("profile_pods_total{profile=%q,result=%q} = %v, want 1", profile, tt.wantResult, got)
				}
			}
		})
	}
}

func TestProfileRewriteWithoutProfilesNeedsNoInformers(t *testing.T) {
	// nil lookups: a call would panic.
	r := NewProfileRewriter(testNames, policy.Default, nil, nil, nil)
	err := r.RewritePod("any", profilePod(optedIn, nil, corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}))
	if err == nil || !strings.Contains(err.Error(), "no kube-reclaim profile selects it") {
		t.Errorf("an opted-in pod without profiles must be refused, got %v", err)
	}
	if err := r.RewritePod("any", profilePod(nil, nil, corev1.ResourceRequirements{})); err != nil {
		t.Errorf("a regular pod: %v", err)
	}
}

// TestProfilePodThroughTheWebhook: the rewrite and enforcement together, as
// the apiserver stores the pod: native limits = grant, explicit zero
// requests, the record annotations; and the webhook's answer applied and
// sent again changes nothing.
func TestProfilePodThroughTheWebhook(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	th.SetPodRewriter(newTestRewriter(t, testProfiles))
	obj := json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"data","labels":{"kube-reclaim.io/reclaimed":"true"}},` +
		`"spec":{"priority":0,"schedulerName":"default-scheduler","containers":[{"name":"app","image":"busybox","resources":{"requests":{"cpu":"2","memory":"4Gi"},"limits":{"cpu":"8","memory":"4Gi"}}}]}}`)
	body := reviewSpec{kind: "Pod", resource: "pods", subResource: "-", operation: "CREATE", namespace: "data", object: obj}.json(t)
	code, resp := podAnswer(t, th, body)
	if code != http.StatusOK || !resp.Allowed || resp.Patch == nil {
		t.Fatalf("HTTP %d, answer %+v", code, resp)
	}
	stored := apply(t, obj, resp.Patch)
	var pod corev1.Pod
	if err := json.Unmarshal(stored, &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0].Resources
	want := map[string]corev1.ResourceList{
		"limits":   rl("cpu", "2", "memory", "4Gi", "kube-reclaim.io/reclaimed-cpu", "2000", "kube-reclaim.io/reclaimed-memory", "4Gi"),
		"requests": rl("cpu", "0", "memory", "0", "kube-reclaim.io/reclaimed-cpu", "2000", "kube-reclaim.io/reclaimed-memory", "4Gi"),
	}
	for name, got := range map[string]corev1.ResourceList{"limits": c.Limits, "requests": c.Requests} {
		if len(got) != len(want[name]) {
			t.Errorf("%s = %v, want %v", name, got, want[name])
		}
		for k, v := range want[name] {
			if g, ok := got[k]; !ok || g.Cmp(v) != 0 {
				t.Errorf("%s[%s] = %s, want %s", name, k, g.String(), v.String())
			}
		}
	}
	if pod.Annotations[testNames.Profile] != "data" || pod.Spec.SchedulerName != "reclaim-scheduler" ||
		pod.Spec.PriorityClassName != "batch-low" || *pod.Spec.Priority != -10 || *pod.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("stored pod %+v %+v", pod.ObjectMeta, pod.Spec)
	}
	// Reinvocation on the stored form: allowed, nothing more to change.
	again := reviewSpec{kind: "Pod", resource: "pods", subResource: "-", operation: "CREATE", namespace: "data", object: stored}.json(t)
	if code, resp := podAnswer(t, th, again); code != http.StatusOK || !resp.Allowed || resp.Patch != nil {
		t.Errorf("reinvocation: HTTP %d, answer %+v", code, resp)
	}
	// A refusal reaches the apiserver as a denial with the rewriter's reason.
	refused := reviewSpec{kind: "Pod", resource: "pods", subResource: "-", operation: "CREATE", namespace: "web",
		object: json.RawMessage(strings.Replace(string(obj), `"namespace":"data"`, `"namespace":"web"`, 1))}.json(t)
	if code, resp := podAnswer(t, th, refused); code != http.StatusOK || resp.Allowed || resp.Result == nil ||
		!strings.Contains(resp.Result.Message, "no kube-reclaim profile selects it") {
		t.Errorf("unselected pod: HTTP %d, answer %+v", code, resp)
	}
}

// FuzzProfilePodReview runs the pod route with profiles installed over
// opted-in pods of every shape: the answer keeps the invariants of
// checkFuzzAnswer (allowed with a valid patch, or denied with a message).
func FuzzProfilePodReview(f *testing.F) {
	th := newTestHandler(f, testNames, nil)
	th.MaxRequestBytes = 16 << 10
	th.SetPodRewriter(newTestRewriter(f, testProfiles))
	label := `"labels":{"kube-reclaim.io/reclaimed":"true","app":"spark"}`
	for _, obj := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{` + label + `},"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{` + label + `},"spec":{"initContainers":[{"name":"i","resources":{"requests":{"cpu":"1","memory":"1"}}},{"name":"s","restartPolicy":"Always","resources":{"requests":{"cpu":"1m","memory":"1Ki"},"limits":{"cpu":"2"}}}],"containers":[{"name":"a","resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"cpu":"100","memory":"1Gi"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{` + label + `},"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"500m"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{` + label + `,"annotations":{"kube-reclaim.io/opt-out":"true"}},"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{` + label + `},"spec":{"containers":[{"name":"a","resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"1000","kube-reclaim.io/reclaimed-memory":"1Gi","cpu":"1"},"limits":{"kube-reclaim.io/reclaimed-cpu":"1000","kube-reclaim.io/reclaimed-memory":"1Gi"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"kube-reclaim.io/reclaimed":"true"}},"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi"}}}]}}`,
	} {
		for _, ns := range []string{"data", "web", "unknown"} {
			f.Add(reviewSpec{kind: "Pod", resource: "pods", subResource: "-", operation: "CREATE", namespace: ns, object: json.RawMessage(obj)}.json(f))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFuzzAnswer(t, th, PodPath, body)
	})
}
