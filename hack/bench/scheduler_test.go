package main

import (
	"math"
	"testing"
	"time"
)

func TestParseVerbTimesSumsCodesPerRoute(t *testing.T) {
	text := `# HELP kube_reclaim_extender_http_request_duration_seconds Latency of HTTP requests by route and status code.
# TYPE kube_reclaim_extender_http_request_duration_seconds histogram
kube_reclaim_extender_http_request_duration_seconds_bucket{code="200",route="filter",le="0.001"} 90
kube_reclaim_extender_http_request_duration_seconds_sum{code="200",route="filter"} 0.5
kube_reclaim_extender_http_request_duration_seconds_count{code="200",route="filter"} 100
kube_reclaim_extender_http_request_duration_seconds_sum{code="400",route="filter"} 0.1
kube_reclaim_extender_http_request_duration_seconds_count{code="400",route="filter"} 10
kube_reclaim_extender_http_request_duration_seconds_sum{code="200",route="bind"} 2
kube_reclaim_extender_http_request_duration_seconds_count{code="200",route="bind"} 100
kube_reclaim_webhook_http_request_duration_seconds_sum{code="200",route="/mutate"} 9
kube_reclaim_extender_http_request_duration_seconds_sum{code="200",route="/odd"} not-a-number
`
	got := parseVerbTimes(text, extenderDurationMetric)
	for route, want := range map[string]verbTime{"filter": {0.6, 110}, "bind": {2, 100}} {
		if g := got[route]; math.Abs(g.sum-want.sum) > 1e-12 || g.count != want.count {
			t.Errorf("%s = %+v, want %+v", route, g, want)
		}
	}
	if _, ok := got["/mutate"]; ok {
		t.Error("another component's histogram was counted")
	}
	if _, ok := got["/odd"]; ok {
		t.Error("a malformed value was counted")
	}
}

func TestMeanDeltaIsPerRequestBetweenScrapes(t *testing.T) {
	before := map[string]verbTime{"/filter": {1, 100}, "/bind": {5, 50}}
	after := map[string]verbTime{"/filter": {1.5, 200}, "/bind": {5, 50}, "/prioritize": {0.2, 100}}
	got := meanDelta(before, after)
	want := map[string]float64{"/filter": 5, "/prioritize": 2}
	if len(got) != len(want) {
		t.Fatalf("meanDelta = %v, want %v (a route without new requests has no mean)", got, want)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("%s = %v ms, want %v ms", k, got[k], v)
		}
	}
}

func TestParseProcStats(t *testing.T) {
	status := "Name:\tkube-reclaim\nVmPeak:\t 2000000 kB\nVmHWM:\t  300000 kB\nVmRSS:\t  200000 kB\nRssAnon:\t  150000 kB\nThreads:\t12\n"
	// The command name may hold spaces and parentheses.
	stat := "4242 (kube reclaim) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 2000000000 50000"
	s, err := parseProcStats(status, stat)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.RSSMB-204.8) > 1e-9 || math.Abs(s.PeakMB-307.2) > 1e-9 || math.Abs(s.AnonMB-153.6) > 1e-9 {
		t.Errorf("RSS %v MB, peak %v MB, anonymous %v MB, want 204.8, 307.2 and 153.6", s.RSSMB, s.PeakMB, s.AnonMB)
	}
	if s.CPU != 3*time.Second {
		t.Errorf("CPU %v, want 3s (250 + 50 ticks)", s.CPU)
	}
	for name, tc := range map[string][2]string{
		"no memory lines":   {"Name:\tx\n", stat},
		"stat without name": {status, "4242 S 1"},
		"short stat":        {status, "4242 (x) S 1 2"},
	} {
		if _, err := parseProcStats(tc[0], tc[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestLastLiveHeapReadsTheLastCollection(t *testing.T) {
	log := `time="2026-11-21T21:40:00Z" level=info msg="extender starting"
gc 12 @146.792s 1%: 2.7+265+0.005 ms clock, 5.5+0/144/218+0.011 ms cpu, 2022->2023->55 MB, 2749 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 13 @171.731s 1%: 4.3+319+0.004 ms clock, 8.6+4.2/173/433+0.009 ms cpu, 95->96->56 MB, 112 MB goal, 0 MB stacks, 0 MB globals, 2 P
time="2026-11-21T21:40:05Z" level=info msg="informers synced"
`
	if v, ok := lastLiveHeap(log); !ok || v != 56 {
		t.Errorf("lastLiveHeap = %v, %v; want 56, true", v, ok)
	}
	if _, ok := lastLiveHeap("no collection yet\n"); ok {
		t.Error("a log without gc lines gave a heap size")
	}
}
