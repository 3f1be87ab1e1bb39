package kubectlreclaim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestExplainShowsEveryTermWithRunningValueAndCheck(t *testing.T) {
	out, _, err := run(t, fourNodes(), "explain", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	want := `Node:          node-a
Policy:        usage (pool "batch")
Written:       30s ago (2026-03-01T11:59:30Z)
Usage sample:  45s ago, 15s before the write (2026-03-01T11:59:15Z)
Held:          cpu 0, memory 0 (what reclaimed pods held at the write)
Floor:         cpu 4900m, memory 16.6Gi (17824114278) (max of held and the room in effect: the status value kubelet admits against)
Annotated:     cpu 4900m, memory 16.6Gi (17824114278)
In effect:     cpu 4900m, memory 16.6Gi (17824114278)

Status: Fresh: the webhook and the extender offer these values to reclaimed pods.

CPU: allocatable - margin - regular-peak-usage - unmeasured-requests, at least floor, at most cap, zero below minimum
  TERM                 OP          VALUE  RUNNING  MEANING
  allocatable          start at    16     16       allocatable cpu of the node
  margin               minus       1600m  14400m   safety margin: 10% of allocatable kept unreclaimed
  regular-peak-usage   minus       9      5400m    usage of everything not reclaimed: p95 over 5m0s of 20 samples: node usage minus reclaimed pods' usage
  system-usage         (info)      700m   5400m    of which used outside any pod, for information: node usage beyond its pods, same statistic; included in regular-peak-usage
  unmeasured-requests  minus       500m   4900m    regular pods not measured yet: requests of 1 regular pods without usage samples
  floor                at least    0      4900m    never below this
  cap                  at most     8      4900m    never above this: 50% of allocatable at most
  minimum              zero below  0      4900m    zero when below this minimum
  = 4900m
  check: the terms evaluate to 4900m, the published value.

Memory: allocatable - margin - regular-peak-usage - unmeasured-requests, at least floor, at most cap, zero below minimum
  TERM                 OP          VALUE               RUNNING               MEANING
  allocatable          start at    64Gi                64Gi                  allocatable memory of the node
  margin               minus       6.4Gi (6871947674)  57.6Gi (61847529062)  safety margin: 10% of allocatable kept unreclaimed
  regular-peak-usage   minus       40Gi                17.6Gi (18897856102)  usage of everything not reclaimed: p95 over 5m0s of 20 samples: node usage minus reclaimed pods' usage
  system-usage         (info)      2Gi                 17.6Gi (18897856102)  of which used outside any pod, for information: node usage beyond its pods, same statistic; included in regular-peak-usage
  unmeasured-requests  minus       1Gi                 16.6Gi (17824114278)  regular pods not measured yet: requests of 1 regular pods without usage samples
  floor                at least    0                   16.6Gi (17824114278)  never below this
  cap                  at most     32Gi                16.6Gi (17824114278)  never above this: 50% of allocatable at most
  minimum              zero below  0                   16.6Gi (17824114278)  zero when below this minimum
  = 16.6Gi (17824114278)
  check: the terms evaluate to 16.6Gi (17824114278), the published value.
`
	if out != want {
		t.Errorf("explain:\n%s\nwant:\n%s", out, want)
	}
}

func TestExplainStaleAnnotationSaysWhyItCountsAsZero(t *testing.T) {
	out, _, err := run(t, fourNodes(), "explain", "node-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Annotated:     cpu 4, memory 8Gi\nIn effect:     cpu 0, memory 0 (stale)\n",
		"Status: Stale (annotation-too-old): annotation written 25m0s ago (stale after 10m0s). The publisher rewrites the annotation " +
			"at least every refresh interval, so it is down, not leading, or failing to patch the node",
		"The extender offers no room and the webhook writes only what reclaimed pods held until it writes again",
		"The terms below are those of the last computation, when the annotation was written.\n",
		"CPU: allocatable - regular-requests, at least floor, at most cap, zero below minimum\n",
		"  regular-requests  minus       12     4        regular (not reclaimed) pods: requests of 7 regular pods\n",
		"  check: the terms evaluate to 4, the published value.\n",
		"  regular-requests  minus       56Gi   8Gi      regular (not reclaimed) pods: requests of 7 regular pods\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestExplainZeroOnPurposeSaysWhatToCheck(t *testing.T) {
	out, _, err := run(t, fourNodes(), "explain", "node-d")
	if err != nil {
		t.Fatal(err)
	}
	want := `Node:          node-d
Policy:        usage
Written:       60s ago (2026-03-01T11:59:00Z)
Usage sample:  4m ago, 3m before the write (2026-03-01T11:56:00Z)
Held:          cpu 0, memory 0 (what reclaimed pods held at the write)
Floor:         cpu 0, memory 0 (max of held and the room in effect: the status value kubelet admits against)
Annotated:     cpu 0, memory 0
In effect:     cpu 0, memory 0

Status: Zero on purpose (metrics-stale): the newest usage sample of the node was too old when the publisher ran, and a value computed from old usage could over-book the node. Check metrics-server and the node's kubelet resource metrics; the publisher republishes as soon as fresh samples arrive.

CPU: metrics-stale
  TERM           OP        VALUE  RUNNING  MEANING
  metrics-stale  start at  0      0        usage samples too old, publish zero: newest node sample is 4m0s old (stale after 2m0s)
  = 0
  check: the terms evaluate to 0, the published value.

Memory: metrics-stale
  TERM           OP        VALUE  RUNNING  MEANING
  metrics-stale  start at  0      0        usage samples too old, publish zero: newest node sample is 4m0s old (stale after 2m0s)
  = 0
  check: the terms evaluate to 0, the published value.
`
	if out != want {
		t.Errorf("explain:\n%s\nwant:\n%s", out, want)
	}
}

func TestExplainFailsClearlyWithoutAReadableAnnotation(t *testing.T) {
	malformed := bare("node-m").RawAnnotation(`{"cpu": -5, "writeTime": "2026-03-01T11:59:00Z"}`).Obj()
	w := fourNodes()
	w.objects = append(w.objects, malformed)
	tests := []struct {
		node string
		want []string
	}{
		{"node-c", []string{`node "node-c" has no kube-reclaim.io/reclaimable annotation`, "count it as zero",
			"Check that the publisher is running and leading, that it uses --resource-domain kube-reclaim.io"}},
		{"node-m", []string{`node "node-m": the kube-reclaim.io/reclaimable annotation cannot be read (annotation has negative values (cpu=-5, memory=0))`}},
		{"node-z", []string{`nodes "node-z" not found`}},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			out, _, err := run(t, w, "explain", tt.node)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// withExplanation is node-e, fresh, publishing cpu/memory with explanation e.
func withExplanation(cpu, memory int64, e *reclaimable.Explanation) world {
	n := annotated("node-e", reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: memory, Policy: "request",
		WriteTime: now.Add(-time.Minute), Explanation: e}, reclaimable.Resources{CPUMilli: cpu, MemoryBytes: memory})
	return world{objects: []runtime.Object{n}}
}

func TestExplainChecksTheTermsAgainstThePublishedValue(t *testing.T) {
	tests := []struct {
		name        string
		cpu, memory int64
		mutate      func(*reclaimable.Explanation)
		wantErr     bool
		want        []string
	}{
		{
			name: "a previous value kept by the publisher's noise filter is explained, not an error",
			cpu:  4100, memory: 8 * gib,
			want: []string{"  check: the terms evaluate to 4; the annotation publishes 4100m, the previous value, kept because the decrease " +
				"is below the publisher's --decrease-threshold (noise) and the reclaimed pods on the node still fit.\n",
				"  check: the terms evaluate to 8Gi, the published value.\n"},
		},
		{
			name: "publishing less than the terms give fails",
			cpu:  4000, memory: 7 * gib,
			wantErr: true,
			want: []string{"  check FAILED: the terms evaluate to 8Gi but the annotation publishes 7Gi; the publisher never publishes less " +
				"than its terms give (edited by hand, or written by another publisher version?).\n"},
		},
		{
			name: "terms that do not add up to their recorded result fail",
			cpu:  4000, memory: 8 * gib,
			mutate:  func(e *reclaimable.Explanation) { e.CPU.Terms[1].Value = 11000 },
			wantErr: true,
			want:    []string{"  = 5\n  check FAILED: the terms evaluate to 5 but the explanation records 4 as their result (a publisher bug).\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := requestExplanation()
			if tt.mutate != nil {
				tt.mutate(e)
			}
			out, _, err := run(t, withExplanation(tt.cpu, tt.memory, e), "explain", "node-e")
			if (err != nil) != tt.wantErr {
				t.Errorf("error %v, want error %v", err, tt.wantErr)
			}
			if err != nil && err.Error() != "the explanation does not evaluate to the published values" {
				t.Errorf("error %q", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestExplainWithoutExplanationShowsTheValues(t *testing.T) {
	out, _, err := run(t, withExplanation(1000, gib, nil), "explain", "node-e")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "In effect:     cpu 1, memory 1Gi\n\nStatus: Fresh: the webhook and the extender offer these values to reclaimed pods.\n\n"+
		"The annotation carries no explanation (the publisher that wrote it does not record one).\n") {
		t.Errorf("explain:\n%s", out)
	}
}

func TestExplainJSONCarriesVerdictExplanationAndEvaluation(t *testing.T) {
	out, _, err := run(t, fourNodes(), "explain", "node-b", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r ExplainReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Node != "node-b" || r.Fresh || r.StaleReason != reclaimable.ReasonWriteTooOld || r.Published != (reclaimable.Resources{}) || !r.Consistent {
		t.Errorf("report %+v", r)
	}
	if r.Evaluated == nil || *r.Evaluated != (res(4000, 8<<30)) {
		t.Errorf("evaluated %+v", r.Evaluated)
	}
	if r.Annotation == nil || r.Annotation.Explanation == nil || len(r.Annotation.Explanation.CPU.Terms) != 5 {
		t.Errorf("annotation %+v", r.Annotation)
	}
}

func TestExplainFloorIsHeldWhenTheRoomIsStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		written   time.Time
		wantFloor reclaimable.Resources
	}{
		{"fresh: each resource is the larger of room and held", now.Add(-time.Minute), reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 2 << 30}},
		{"stale room counts as zero, held stays", now.Add(-time.Hour), reclaimable.Resources{CPUMilli: 3000, MemoryBytes: 2 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := reclaimable.Resources{CPUMilli: 3000, MemoryBytes: 2 << 30}
			a := reclaimable.Annotation{CPUMilli: 4000, MemoryBytes: 1 << 30, Policy: "usage", WriteTime: tc.written, Held: &held}
			r, err := explainReport(annotated("n", a, tc.wantFloor), testNames, now, 10*time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Held != held || r.Floor != tc.wantFloor {
				t.Errorf("held %+v floor %+v, want held %+v floor %+v", r.Held, r.Floor, held, tc.wantFloor)
			}
		})
	}
}
