package enforcement

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

// rl builds a ResourceList from name/quantity pairs; "rcpu" and "rmem"
// stand for the reclaimed resources.
func rl(kv ...string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		n := corev1.ResourceName(kv[i])
		switch kv[i] {
		case "rcpu":
			n = names.CPU
		case "rmem":
			n = names.Memory
		}
		out[n] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

// reclaimed is the usual batch container: 2 cores and 4 GiB reclaimed.
func reclaimed(name string) corev1.Container {
	return ctr(name, rl("rcpu", "2000", "rmem", "4Gi"), rl("rcpu", "2000", "rmem", "4Gi"))
}

// sameValues compares specs with quantities by value, not spelling.
func sameValues(a, b *corev1.PodSpec) bool { return apiequality.Semantic.DeepEqual(a, b) }

func resourcesOf(s *corev1.PodSpec) string {
	var b strings.Builder
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range cs {
			fmt.Fprintf(&b, "%s: requests %v limits %v\n", c.Name, c.Resources.Requests, c.Resources.Limits)
		}
	}
	return b.String()
}

func TestEnforce(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name        string
		spec        corev1.PodSpec
		want        corev1.PodSpec // ignored when wantErr
		wantChanged bool
		wantErr     []string // substrings of the error, one per problem
		wantReasons []Reason
	}{
		{
			name: "pod without reclaimed resources is untouched",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("app", rl("cpu", "1", "memory", "1Gi"), nil), ctr("bare", nil, nil)}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("app", rl("cpu", "1", "memory", "1Gi"), nil), ctr("bare", nil, nil)}},
		},
		{
			name: "reclaimed container gets its grant as limits and explicit zero requests",
			spec: corev1.PodSpec{Containers: []corev1.Container{reclaimed("batch")}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("batch",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
			wantChanged: true,
		},
		{
			name: "reclaimed amount given only as a limit counts like a request",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("batch", nil, rl("rcpu", "500", "rmem", "1Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("batch",
				rl("cpu", "0", "memory", "0"),
				rl("rcpu", "500", "rmem", "1Gi", "cpu", "500m", "memory", "1Gi"))}},
			wantChanged: true,
		},
		{
			name: "native requests are kept and added to the grant",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("mixed",
				rl("cpu", "250m", "memory", "256Mi", "rcpu", "1000", "rmem", "1Gi"),
				rl("rcpu", "1000", "rmem", "1Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("mixed",
				rl("cpu", "250m", "memory", "256Mi", "rcpu", "1000", "rmem", "1Gi"),
				rl("rcpu", "1000", "rmem", "1Gi", "cpu", "1250m", "memory", "1280Mi"))}},
			wantChanged: true,
		},
		{
			name: "own limits lower than the grant are kept",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("low",
				rl("rcpu", "2000", "rmem", "4Gi"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "1", "memory", "2Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("low",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "1", "memory", "2Gi"))}},
			wantChanged: true,
		},
		{
			name: "own limits higher than the grant are lowered to it",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("high",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "8", "memory", "64Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("high",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
			wantChanged: true,
		},
		{
			name: "an own zero limit means no limit to kubelet and is replaced by the grant",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("zero",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("zero",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
			wantChanged: true,
		},
		{
			name: "only reclaimed cpu with a native memory request: the memory limit is that request",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("cpuonly",
				rl("rcpu", "1500", "memory", "512Mi"), rl("rcpu", "1500"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("cpuonly",
				rl("rcpu", "1500", "memory", "512Mi", "cpu", "0"),
				rl("rcpu", "1500", "cpu", "1500m", "memory", "512Mi"))}},
			wantChanged: true,
		},
		{
			name: "only reclaimed memory with a native cpu request: the cpu limit is that request",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("memonly",
				rl("rmem", "1Gi", "cpu", "100m"), rl("rmem", "1Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("memonly",
				rl("rmem", "1Gi", "cpu", "100m", "memory", "0"),
				rl("rmem", "1Gi", "cpu", "100m", "memory", "1Gi"))}},
			wantChanged: true,
		},
		{
			name: "every container kind is enforced; containers without reclaimed resources are left alone",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					reclaimed("init"),
					func() corev1.Container { c := reclaimed("sidecar"); c.RestartPolicy = &always; return c }(),
					ctr("plain-init", rl("cpu", "100m"), nil),
				},
				Containers: []corev1.Container{reclaimed("main"), ctr("native", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "2"))},
			},
			want: corev1.PodSpec{
				InitContainers: []corev1.Container{
					ctr("init", rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"), rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi")),
					func() corev1.Container {
						c := ctr("sidecar", rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"), rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))
						c.RestartPolicy = &always
						return c
					}(),
					ctr("plain-init", rl("cpu", "100m"), nil),
				},
				Containers: []corev1.Container{
					ctr("main", rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"), rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi")),
					ctr("native", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "2")),
				},
			},
			wantChanged: true,
		},
		{
			name: "already enforced pod is not changed",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("done",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("done",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
		},
		{
			name: "zero reclaimed amounts alone do not make a container take part",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("zero", rl("rcpu", "0"), rl("rcpu", "0"))}},
			want: corev1.PodSpec{Containers: []corev1.Container{ctr("zero", rl("rcpu", "0"), rl("rcpu", "0"))}},
		},
		{
			name:        "reclaimed request different from its limit is refused",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("skew", rl("rcpu", "1000", "rmem", "1Gi"), rl("rcpu", "2000", "rmem", "1Gi"))}},
			wantErr:     []string{`container "skew": kube-reclaim.io/reclaimed-cpu request 1k differs from its limit 2k; set them equal`},
			wantReasons: []Reason{ReasonRequestNotLimit},
		},
		{
			name:        "reclaimed request without a limit is refused",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("nolim", rl("rcpu", "1000", "rmem", "1Gi"), rl("rcpu", "1000"))}},
			wantErr:     []string{`container "nolim": kube-reclaim.io/reclaimed-memory has a request (1Gi) but no limit; set limits.kube-reclaim.io/reclaimed-memory equal to the request`},
			wantReasons: []Reason{ReasonRequestNotLimit},
		},
		{
			name:        "reclaimed cpu without any memory grant is refused: it would have no memory limit",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("nomem", rl("rcpu", "1000"), rl("rcpu", "1000"))}},
			wantErr:     []string{`container "nomem": asks for kube-reclaim.io/reclaimed-cpu but is granted no memory`, "add kube-reclaim.io/reclaimed-memory (requests and limits) or a native memory request"},
			wantReasons: []Reason{ReasonNoMemoryGrant},
		},
		{
			name:        "reclaimed memory without any cpu grant is refused: it would have no CPU quota",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("nocpu", rl("rmem", "1Gi"), rl("rmem", "1Gi"))}},
			wantErr:     []string{`container "nocpu": asks for kube-reclaim.io/reclaimed-memory but is granted no CPU`, "add kube-reclaim.io/reclaimed-cpu"},
			wantReasons: []Reason{ReasonNoCPUGrant},
		},
		{
			name:        "negative reclaimed amount is refused",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("neg", rl("rcpu", "-1", "rmem", "1Gi"), rl("rcpu", "-1", "rmem", "1Gi"))}},
			wantErr:     []string{`container "neg": kube-reclaim.io/reclaimed-cpu is negative`},
			wantReasons: []Reason{ReasonNegative, ReasonNoCPUGrant},
		},
		{
			name:        "a grant that overflows is refused",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("huge", rl("rcpu", "9223372036854775807", "rmem", "1Gi", "cpu", "1"), rl("rcpu", "9223372036854775807", "rmem", "1Gi"))}},
			wantErr:     []string{`container "huge": its cpu grant (native request + reclaimed amount) does not fit in 64 bits`},
			wantReasons: []Reason{ReasonTooLarge},
		},
		{
			name: "every problem of every container is listed at once and nothing is changed",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{ctr("i", rl("rcpu", "1000"), rl("rcpu", "1000"))},
				Containers:     []corev1.Container{reclaimed("fine"), ctr("c", rl("rmem", "1Gi"), rl("rmem", "2Gi"))},
			},
			wantErr: []string{
				`init container "i": asks for kube-reclaim.io/reclaimed-cpu but is granted no memory`,
				`container "c": kube-reclaim.io/reclaimed-memory request 1Gi differs from its limit 2Gi`,
				`container "c": asks for kube-reclaim.io/reclaimed-memory but is granted no CPU`,
			},
			wantReasons: []Reason{ReasonNoMemoryGrant, ReasonRequestNotLimit, ReasonNoCPUGrant},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec.DeepCopy()
			changed, err := Enforce(spec, names)
			if tt.wantErr != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Enforce error = %v, want an *Error", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q\ndoes not say %q", err, s)
					}
				}
				if !slices.Equal(tt.wantReasons, e.Reasons()) {
					t.Errorf("reasons = %v, want %v", e.Reasons(), tt.wantReasons)
				}
				if !reflect.DeepEqual(&tt.spec, spec) || changed {
					t.Errorf("a refused pod was changed (changed=%v):\n%s", changed, resourcesOf(spec))
				}
				return
			}
			if err != nil {
				t.Fatalf("Enforce: %v", err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !sameValues(&tt.want, spec) {
				t.Errorf("spec after Enforce:\n%swant:\n%s", resourcesOf(spec), resourcesOf(&tt.want))
			}
			if !changed && !reflect.DeepEqual(&tt.spec, spec) {
				t.Errorf("changed=false but the spec differs, spelling included:\n%s", resourcesOf(spec))
			}
			// Idempotent: a second call (reinvocation, second webhook) changes nothing.
			again := spec.DeepCopy()
			if changed2, err := Enforce(again, names); err != nil || changed2 {
				t.Errorf("second Enforce = %v, %v; want false, nil", changed2, err)
			}
			if !reflect.DeepEqual(spec, again) {
				t.Errorf("second Enforce changed the spec:\n%s", resourcesOf(again))
			}
			if err := Enforced(spec, names); err != nil {
				t.Errorf("Enforced after Enforce: %v", err)
			}
		})
	}
}

func TestEnforced(t *testing.T) {
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		wantErr []string
	}{
		{
			name: "pod without reclaimed resources passes",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("app", rl("cpu", "1"), nil)}},
		},
		{
			name: "enforced pod passes",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("done",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "2", "memory", "4Gi"))}},
		},
		{
			name: "limits below the grant pass",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("low",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "1", "memory", "1Gi"))}},
		},
		{
			name: "reclaimed pod created without the webhook names what is missing",
			spec: corev1.PodSpec{Containers: []corev1.Container{reclaimed("raw")}},
			wantErr: []string{
				`container "raw": no explicit requests.cpu`, "no limits.cpu (set it to its grant 2)",
				"no explicit requests.memory", "no limits.memory (set it to its grant 4Gi)",
				"create it through the kube-reclaim pod webhook",
			},
		},
		{
			name: "limits above the grant fail",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr("high",
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "0", "memory", "0"),
				rl("rcpu", "2000", "rmem", "4Gi", "cpu", "3", "memory", "4Gi"))}},
			wantErr: []string{`container "high": limits.cpu 3 is not within its grant 2`},
		},
		{
			name:    "a pod Enforce would refuse fails with the same problem",
			spec:    corev1.PodSpec{Containers: []corev1.Container{ctr("nomem", rl("rcpu", "1000"), rl("rcpu", "1000"))}},
			wantErr: []string{`container "nomem": asks for kube-reclaim.io/reclaimed-cpu but is granted no memory`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Enforced(&tt.spec, names)
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("Enforced: %v", err)
				}
			} else {
				if err == nil {
					t.Fatal("Enforced = nil, want an error")
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q\ndoes not say %q", err, s)
					}
				}
			}
			// Enforced agrees with Enforce: nil exactly when Enforce would
			// change nothing and not fail.
			changed, enfErr := Enforce(tt.spec.DeepCopy(), names)
			if wouldPass := !changed && enfErr == nil; wouldPass != (err == nil) {
				t.Errorf("Enforced = %v but Enforce = %v, %v", err, changed, enfErr)
			}
		})
	}
}
