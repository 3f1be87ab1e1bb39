package reclaimable

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

var n = MustNames(DefaultDomain)

func container(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestPodRequest(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cpu, mem := string(n.CPU), string(n.Memory)
	cases := []struct {
		name     string
		pod      corev1.PodSpec
		want     Resources
		mismatch bool
	}{
		{"a pod without reclaimed resources requests nothing",
			corev1.PodSpec{Containers: []corev1.Container{container(list("cpu", "2"), nil)}}, Resources{}, false},
		{"app containers add up",
			corev1.PodSpec{Containers: []corev1.Container{
				container(list(cpu, "1500", mem, "1Gi"), list(cpu, "1500", mem, "1Gi")),
				container(list(cpu, "500"), list(cpu, "500")),
			}}, Resources{CPUMilli: 2000, MemoryBytes: 1 << 30}, false},
		{"a larger init container sets the effective request",
			corev1.PodSpec{
				InitContainers: []corev1.Container{container(list(cpu, "4000"), list(cpu, "4000"))},
				Containers:     []corev1.Container{container(list(cpu, "1000"), list(cpu, "1000"))},
			}, Resources{CPUMilli: 4000}, false},
		{"sidecar init containers add to the app containers",
			corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{
					Requests: list(cpu, "300"), Limits: list(cpu, "300")}}},
				Containers: []corev1.Container{container(list(cpu, "1000"), list(cpu, "1000"))},
			}, Resources{CPUMilli: 1300}, false},
		{"a request different from its limit is a mismatch",
			corev1.PodSpec{Containers: []corev1.Container{container(list(cpu, "1000"), list(cpu, "2000"))}},
			Resources{CPUMilli: 1000}, true},
		{"a request without a limit is a mismatch",
			corev1.PodSpec{Containers: []corev1.Container{container(list(mem, "1Gi"), nil)}},
			Resources{MemoryBytes: 1 << 30}, true},
		{"a limit alone counts as the request",
			corev1.PodSpec{Containers: []corev1.Container{container(nil, list(cpu, "700"))}},
			Resources{CPUMilli: 700}, false},
		{"pod overhead is added",
			corev1.PodSpec{Overhead: list(cpu, "100"), Containers: []corev1.Container{container(list(cpu, "1000"), list(cpu, "1000"))}},
			Resources{CPUMilli: 1100}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, mismatch := n.PodRequest(&corev1.Pod{Spec: tc.pod})
			if got != tc.want || mismatch != tc.mismatch {
				t.Errorf("got %+v mismatch=%v, want %+v mismatch=%v", got, mismatch, tc.want, tc.mismatch)
			}
			if n.IsReclaimedPod(&corev1.Pod{Spec: tc.pod}) != !tc.want.IsZero() {
				t.Errorf("IsReclaimedPod disagrees with the request %+v", tc.want)
			}
		})
	}
}

func TestNativeRequestCountsCPUAndMemoryLikeTheScheduler(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{container(list("cpu", "3", "memory", "1Gi"), nil)},
		Containers:     []corev1.Container{container(list("cpu", "500m", "memory", "2Gi"), nil), container(list("cpu", "1"), nil)},
	}}
	if got, want := NativeRequest(pod), (Resources{CPUMilli: 3000, MemoryBytes: 2 << 30}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ann := func(writeTime time.Time) string {
		v, err := Annotation{CPUMilli: 1500, MemoryBytes: 2048, Policy: "usage", WriteTime: writeTime}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name    string
		value   string
		present bool
		alive   bool
		fresh   bool
		reason  string
		values  Resources
	}{
		{"a fresh annotation is trusted", ann(now.Add(-time.Minute)), true, true, true, "", Resources{1500, 2048}},
		{"a missing annotation is zero", "", false, true, false, ReasonMissing, Resources{}},
		{"malformed JSON is zero", "{cpu:", true, true, false, ReasonMalformed, Resources{}},
		{"negative values are zero", `{"cpu":-1,"memory":5,"writeTime":"2026-01-01T11:59:00Z"}`, true, true, false, ReasonMalformed, Resources{}},
		{"an annotation without writeTime is zero", `{"cpu":1,"memory":5}`, true, true, false, ReasonMalformed, Resources{}},
		{"an annotation older than stale-after is zero", ann(now.Add(-11 * time.Minute)), true, true, false, ReasonWriteTooOld, Resources{}},
		{"a slightly future write time is tolerated", ann(now.Add(30 * time.Second)), true, true, true, "", Resources{1500, 2048}},
		{"a write time far in the future is zero", ann(now.Add(time.Hour)), true, true, false, ReasonFuture, Resources{}},
		{"a dead publisher lease makes a fresh annotation zero", ann(now), true, false, false, ReasonPublisherDown, Resources{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Judge(tc.value, tc.present, now, 10*time.Minute, tc.alive)
			if f.Fresh != tc.fresh || f.Reason != tc.reason || f.Room != tc.values {
				t.Errorf("got fresh=%v reason=%q values=%+v (%s), want fresh=%v reason=%q values=%+v",
					f.Fresh, f.Reason, f.Room, f.Detail, tc.fresh, tc.reason, tc.values)
			}
			if !f.Fresh && f.Detail == "" {
				t.Error("a stale verdict must explain itself")
			}
		})
	}
}

func TestJudgeKeepsWhatWasHeldWhateverTheVerdict(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	held := &Resources{CPUMilli: 4000, MemoryBytes: 1 << 30}
	ann := func(writeTime time.Time, h *Resources) string {
		v, err := Annotation{CPUMilli: 0, MemoryBytes: 0, Policy: "usage", WriteTime: writeTime, Held: h}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name    string
		value   string
		present bool
		alive   bool
		want    Resources
	}{
		{"a fresh annotation carries its held", ann(now, held), true, true, *held},
		{"an annotation too old still carries its held", ann(now.Add(-time.Hour), held), true, true, *held},
		{"an annotation from the future still carries its held", ann(now.Add(time.Hour), held), true, true, *held},
		{"a dead publisher's annotation still carries its held", ann(now, held), true, false, *held},
		{"an annotation written before held existed holds nothing", ann(now, nil), true, true, Resources{}},
		{"a missing annotation holds nothing", "", false, true, Resources{}},
		{"negative held values make the annotation malformed",
			`{"cpu":1,"memory":5,"held":{"cpuMilli":-1,"memoryBytes":0},"writeTime":"2026-01-01T11:59:00Z"}`, true, true, Resources{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Judge(tc.value, tc.present, now, 10*time.Minute, tc.alive)
			if f.Held != tc.want {
				t.Errorf("held = %+v, want %+v (%s %s)", f.Held, tc.want, f.Reason, f.Detail)
			}
		})
	}
}

func TestResourcesMaxIsPerResource(t *testing.T) {
	got := Resources{CPUMilli: 0, MemoryBytes: 5}.Max(Resources{CPUMilli: 4000, MemoryBytes: 2})
	if want := (Resources{CPUMilli: 4000, MemoryBytes: 5}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestNewNamesRejectsADomainThatIsNotADNSSubdomain(t *testing.T) {
	if _, err := NewNames("Not A Domain/"); err == nil || !strings.Contains(err.Error(), "DNS subdomain") {
		t.Errorf("got %v, want a DNS subdomain error", err)
	}
	got := MustNames("example.com")
	if got.CPU != "example.com/reclaimed-cpu" || got.Memory != "example.com/reclaimed-memory" || got.Annotation != "example.com/reclaimable" {
		t.Errorf("unexpected names %+v", got)
	}
}

// The oversell keys sit under the prefix NodeRestriction keeps kubelets
// from setting, with the whole domain in the name part.
func TestOversellKeysAreLabelsAKubeletCannotSet(t *testing.T) {
	for _, c := range []struct {
		domain, cpu, memory, err string
	}{
		{domain: "kube-reclaim.io", cpu: "node-restriction.kubernetes.io/kube-reclaim.io-oversell-cpu-ratio",
			memory: "node-restriction.kubernetes.io/kube-reclaim.io-oversell-memory-ratio"},
		{domain: "kube-reclaim.example.com", cpu: "node-restriction.kubernetes.io/kube-reclaim.example.com-oversell-cpu-ratio",
			memory: "node-restriction.kubernetes.io/kube-reclaim.example.com-oversell-memory-ratio"},
		{domain: strings.Repeat("a", 41), cpu: "node-restriction.kubernetes.io/" + strings.Repeat("a", 41) + "-oversell-cpu-ratio",
			memory: "node-restriction.kubernetes.io/" + strings.Repeat("a", 41) + "-oversell-memory-ratio"},
		{domain: strings.Repeat("a", 42), err: "too long to name the oversell label"},
	} {
		n, err := NewNames(c.domain)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, want an error containing %q", c.domain, err, c.err)
			}
			continue
		}
		if err != nil || n.CPURatio != c.cpu || n.MemoryRatio != c.memory {
			t.Errorf("%s: got %q, %q, %v; want %q, %q", c.domain, n.CPURatio, n.MemoryRatio, err, c.cpu, c.memory)
		}
		for _, k := range []string{n.CPURatio, n.MemoryRatio} {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s is not a valid label key: %v", k, errs)
			}
		}
	}
}

func TestParseRefusesAValueLongerThanAPublisherWrites(t *testing.T) {
	valid := `{"cpu":1,"memory":2,"policy":"usage","writeTime":"2026-03-01T12:00:00Z"}`
	padded := valid[:len(valid)-1] + `,"zeroReason":"` + strings.Repeat("x", MaxAnnotationBytes) + `"}`
	if _, err := Parse(valid); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	if _, err := Parse(padded); err == nil || !strings.Contains(err.Error(), "bytes, more than") {
		t.Errorf("a %d-byte value: got %v, want a size error", len(padded), err)
	}
	if f := Judge(padded, true, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Minute, true); f.Fresh || f.Reason != ReasonMalformed {
		t.Errorf("Judge of a %d-byte value = %+v, want malformed", len(padded), f)
	}
}
