package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// ago returns now minus sec seconds.
func ago(sec int) time.Time { return now.Add(-time.Duration(sec) * time.Second) }

func smp(secAgo int, cpu, mem int64) Sample {
	return Sample{Time: ago(secAgo), CPUMilli: cpu, MemoryBytes: mem}
}

func regular(name string, cpu, mem int64, samples ...Sample) Pod {
	return Pod{Namespace: "default", Name: name, UID: "uid-" + name,
		Requests: reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}, StartTime: ago(3600), Samples: samples}
}

// reclaimed pods carry large native requests to prove they are ignored.
func reclaimedPod(name string, samples ...Sample) Pod {
	return Pod{Namespace: "batch", Name: name, UID: "uid-" + name, Reclaimed: true,
		Requests: reclaimable.Resources{CPUMilli: 9999, MemoryBytes: 9999}, Grant: reclaimable.Resources{CPUMilli: 1 << 40, MemoryBytes: 1 << 50},
		StartTime: ago(3600), Samples: samples}
}

func withGrant(p Pod, cpuMilli, memBytes int64) Pod {
	p.Grant = reclaimable.Resources{CPUMilli: cpuMilli, MemoryBytes: memBytes}
	return p
}

func node(alloc reclaimable.Resources, pods []Pod, samples ...Sample) Node {
	return Node{Name: "n1", Capacity: reclaimable.Resources{CPUMilli: alloc.CPUMilli + 100, MemoryBytes: alloc.MemoryBytes + 100},
		Allocatable: alloc, Pods: pods, Samples: samples}
}

// testSettings: usage, 5m, max, 10s alignment, 35 % margins, no cap, no minimum.
func testSettings(mod ...func(*Settings)) Settings {
	s := Settings{
		Policy: PolicyUsage, Window: 5 * time.Minute, Peak: PeakMax, SampleAlignment: 10 * time.Second,
		ChangeThreshold: 0.1,
		CPU:             ResourceSettings{Margin: 0.35, MaxRatio: 1},
		Memory:          ResourceSettings{Margin: 0.35, MaxRatio: 1},
	}
	for _, m := range mod {
		m(&s)
	}
	return s
}

func twentySamples() []Sample {
	// Sample i (1..20) is 10 x i seconds old with cpu 100 x i and memory 200 x i,
	// so the values descend in time order.
	var out []Sample
	for i := 20; i >= 1; i-- {
		out = append(out, smp(10*i, int64(100*i), int64(200*i)))
	}
	return out
}

var alloc4k10k = reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 10000}

type computeCase struct {
	name       string
	node       Node
	settings   Settings
	staleAfter time.Duration // 2m when zero
	wantCPU    int64
	wantMem    int64
	wantReason string
	// Terms checked by name (subset), in the resource's unit.
	cpuTerms map[string]int64
	memTerms map[string]int64
}

func computeCases() []computeCase {
	return []computeCase{
		{
			name:     "an empty node with no usage reclaims the margin-limited allocatable",
			node:     node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(),
			// 4000 - 4000x0.35 = 2600; 10000 - 3500 = 6500
			wantCPU: 2600, wantMem: 6500,
			cpuTerms: map[string]int64{"allocatable": 4000, "margin": 1400, "regular-peak-usage": 0, "system-usage": 0, "unmeasured-requests": 0, "floor": 0, "cap": 4000, "minimum": 0},
			memTerms: map[string]int64{"allocatable": 10000, "margin": 3500, "cap": 10000},
		},
		{
			name:     "an empty node subtracts its system usage",
			node:     node(alloc4k10k, nil, smp(15, 200, 1000)),
			settings: testSettings(),
			// 4000 - 1400 - 200 = 2400; 10000 - 3500 - 1000 = 5500
			wantCPU: 2400, wantMem: 5500,
			cpuTerms: map[string]int64{"regular-peak-usage": 200, "system-usage": 200},
			memTerms: map[string]int64{"regular-peak-usage": 1000, "system-usage": 1000},
		},
		{
			name:       "a node without samples publishes zero because there are no samples",
			node:       node(alloc4k10k, []Pod{regular("a", 100, 100)}),
			settings:   testSettings(),
			wantReason: ZeroReasonNoSamples,
		},
		{
			name:       "samples older than the stale window publish zero because metrics are stale",
			node:       node(alloc4k10k, nil, smp(200, 0, 0), smp(121, 0, 0)),
			settings:   testSettings(),
			wantReason: ZeroReasonStale,
		},
		{
			name:     "a sample exactly as old as the stale window is still fresh",
			node:     node(alloc4k10k, nil, smp(120, 0, 0)),
			settings: testSettings(),
			wantCPU:  2600, wantMem: 6500,
		},
		{
			name:       "a non-positive stale window falls back to two minutes and keeps fresh samples",
			node:       node(alloc4k10k, nil, smp(119, 0, 0)),
			settings:   testSettings(),
			staleAfter: -1,
			wantCPU:    2600, wantMem: 6500,
		},
		{
			name:       "a non-positive stale window falls back to two minutes and rejects older samples",
			node:       node(alloc4k10k, nil, smp(121, 0, 0)),
			settings:   testSettings(),
			staleAfter: -1,
			wantReason: ZeroReasonStale,
		},
		{
			name:       "a longer stale window keeps older samples fresh",
			node:       node(alloc4k10k, nil, smp(200, 0, 0)),
			settings:   testSettings(),
			staleAfter: 5 * time.Minute,
			wantCPU:    2600, wantMem: 6500,
		},
		{
			name:     "usage above allocatable floors at zero without a zero reason",
			node:     node(alloc4k10k, nil, smp(15, 5000, 12000)),
			settings: testSettings(),
			// 4000 - 1400 - 5000 < 0; 10000 - 3500 - 12000 < 0
			wantCPU: 0, wantMem: 0,
			cpuTerms: map[string]int64{"regular-peak-usage": 5000, "system-usage": 5000},
		},
		{
			name:     "regular pods without samples count at their requests",
			node:     node(alloc4k10k, []Pod{regular("new", 500, 1000)}, smp(15, 1000, 2000)),
			settings: testSettings(),
			// 4000 - 1400 - 1000 - 500 = 1100; 10000 - 3500 - 2000 - 1000 = 3500
			wantCPU: 1100, wantMem: 3500,
			cpuTerms: map[string]int64{"unmeasured-requests": 500},
			memTerms: map[string]int64{"unmeasured-requests": 1000},
		},
		{
			name: "a regular pod that has not started counts at its request",
			node: node(alloc4k10k, []Pod{func() Pod {
				p := regular("pending", 500, 1000, smp(15, 300, 300))
				p.StartTime = time.Time{}
				return p
			}()}, smp(15, 1000, 2000)),
			settings: testSettings(),
			wantCPU:  1100, wantMem: 3500,
		},
		{
			name: "a regular pod that started after the newest node sample counts at its request",
			node: node(alloc4k10k, []Pod{func() Pod {
				p := regular("late", 500, 1000, smp(5, 300, 300))
				p.StartTime = ago(5)
				return p
			}()}, smp(15, 1000, 2000)),
			settings: testSettings(),
			wantCPU:  1100, wantMem: 3500,
		},
		{
			name:     "a regular pod whose only sample left the window counts at its request",
			node:     node(alloc4k10k, []Pod{regular("old", 500, 1000, smp(400, 300, 300))}, smp(15, 1000, 2000)),
			settings: testSettings(),
			wantCPU:  1100, wantMem: 3500,
		},
		{
			name:     "a measured regular pod counts only through the node usage",
			node:     node(alloc4k10k, []Pod{regular("steady", 500, 1000, smp(15, 300, 300))}, smp(15, 1000, 2000)),
			settings: testSettings(),
			// 4000 - 1400 - 1000 = 1600; 10000 - 3500 - 2000 = 4500; system 1000-300, 2000-300
			wantCPU: 1600, wantMem: 4500,
			cpuTerms: map[string]int64{"unmeasured-requests": 0, "system-usage": 700},
			memTerms: map[string]int64{"unmeasured-requests": 0, "system-usage": 1700},
		},
		{
			name: "reclaimed pods' usage is excluded from regular usage",
			node: node(alloc4k10k, []Pod{
				reclaimedPod("r", smp(30, 1500, 2000), smp(15, 1000, 1000)),
				regular("g", 1000, 2000, smp(30, 800, 3000), smp(15, 900, 3500)),
			}, smp(30, 3000, 6000), smp(15, 2500, 5000)),
			settings: testSettings(),
			// regular: cpu 3000-1500=1500, 2500-1000=1500 -> 1500; mem 6000-2000=4000, 5000-1000=4000 -> 4000
			// system: cpu 3000-2300=700, 2500-1900=600 -> 700; mem 6000-5000=1000, 5000-4500=500 -> 1000
			// 4000 - 1400 - 1500 = 1100; 10000 - 3500 - 4000 = 2500
			wantCPU: 1100, wantMem: 2500,
			cpuTerms: map[string]int64{"regular-peak-usage": 1500, "system-usage": 700, "unmeasured-requests": 0},
			memTerms: map[string]int64{"regular-peak-usage": 4000, "system-usage": 1000},
		},
		{
			name:     "a reclaimed pod without samples subtracts nothing and its requests never count",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r")}, smp(15, 2000, 4000)),
			settings: testSettings(),
			// 4000 - 1400 - 2000 = 600; 10000 - 3500 - 4000 = 2500
			wantCPU: 600, wantMem: 2500,
			cpuTerms: map[string]int64{"unmeasured-requests": 0},
		},
		{
			// A report of more than the grant is not the pod's (kubelet caps it
			// there); a forged one from another node moves the room by the
			// grant at most.
			name: "a reclaimed pod's usage counts only up to its grant",
			node: node(alloc4k10k, []Pod{
				withGrant(reclaimedPod("r", smp(15, 1500, 2500)), 500, 1000),
			}, smp(15, 3000, 6000)),
			settings: testSettings(),
			// regular: cpu 3000-min(1500,500)=2500; mem 6000-min(2500,1000)=5000
			// 4000 - 1400 - 2500 = 100; 10000 - 3500 - 5000 = 1500
			wantCPU: 100, wantMem: 1500,
			cpuTerms: map[string]int64{"regular-peak-usage": 2500, "system-usage": 2500},
			memTerms: map[string]int64{"regular-peak-usage": 5000, "system-usage": 5000},
		},
		{
			name:     "reclaimed usage above node usage never makes regular usage negative",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(15, 1500, 2500))}, smp(15, 1000, 2000)),
			settings: testSettings(),
			wantCPU:  2600, wantMem: 6500,
			cpuTerms: map[string]int64{"regular-peak-usage": 0, "system-usage": 0},
		},
		{
			name: "the peak is the maximum of the samples in the window",
			node: node(alloc4k10k, nil,
				smp(400, 3900, 9000), smp(200, 1000, 1000), smp(100, 1800, 3000), smp(10, 1200, 2000)),
			settings: testSettings(),
			// the 400 s old sample is outside 5m; 4000-1400-1800 = 800; 10000-3500-3000 = 3500
			wantCPU: 800, wantMem: 3500,
		},
		{
			name:     "a sample exactly at the window start counts",
			node:     node(alloc4k10k, nil, smp(300, 2000, 5000), smp(10, 1000, 1000)),
			settings: testSettings(),
			// 4000-1400-2000 = 600; 10000-3500-5000 = 1500
			wantCPU: 600, wantMem: 1500,
		},
		{
			name:     "a window holding no sample uses the newest sample alone",
			node:     node(alloc4k10k, nil, smp(90, 3000, 6000), smp(60, 1000, 2000)),
			settings: testSettings(func(s *Settings) { s.Window = 10 * time.Second }),
			// 4000-1400-1000 = 1600; 10000-3500-2000 = 4500
			wantCPU: 1600, wantMem: 4500,
		},
		{
			name: "p50 takes the nearest rank, not an average",
			node: node(alloc4k10k, nil,
				smp(40, 100, 1000), smp(30, 400, 4000), smp(20, 200, 2000), smp(10, 300, 3000)),
			settings: testSettings(func(s *Settings) { s.Peak = Percentile(50) }),
			// sorted 100,200,300,400: rank ceil(0.5x4)=2 -> 200 / 2000
			// 4000-1400-200 = 2400; 10000-3500-2000 = 4500
			wantCPU: 2400, wantMem: 4500,
			cpuTerms: map[string]int64{"regular-peak-usage": 200, "system-usage": 200},
		},
		{
			name:     "p95 of 20 samples is the 19th smallest",
			node:     node(alloc4k10k, nil, twentySamples()...),
			settings: testSettings(func(s *Settings) { s.Peak = Percentile(95) }),
			// rank ceil(0.95x20)=19 -> 1900 / 3800; 4000-1400-1900 = 700; 10000-3500-3800 = 2700
			wantCPU: 700, wantMem: 2700,
		},
		{
			name: "p90 of 5 samples rounds the rank up to the maximum",
			node: node(alloc4k10k, nil,
				smp(50, 300, 300), smp(40, 500, 500), smp(30, 100, 100), smp(20, 400, 400), smp(10, 200, 200)),
			settings: testSettings(func(s *Settings) { s.Peak = Percentile(90) }),
			// rank ceil(0.9x5)=5 -> 500; 4000-1400-500 = 2100; 10000-3500-500 = 6000
			wantCPU: 2100, wantMem: 6000,
		},
		{
			name:     "p99.9 of 20 samples is the maximum",
			node:     node(alloc4k10k, nil, twentySamples()...),
			settings: testSettings(func(s *Settings) { s.Peak = Percentile(99.9) }),
			// rank ceil(19.98)=20 -> 2000 / 4000; 4000-1400-2000 = 600; 10000-3500-4000 = 2500
			wantCPU: 600, wantMem: 2500,
		},
		{
			name:     "p1 of 20 samples is the minimum",
			node:     node(alloc4k10k, nil, twentySamples()...),
			settings: testSettings(func(s *Settings) { s.Peak = Percentile(1) }),
			// rank ceil(0.2)=1 -> 100 / 200; 4000-1400-100 = 2500; 10000-3500-200 = 6300
			wantCPU: 2500, wantMem: 6300,
		},
		{
			name:     "the maximum of 20 samples is the largest",
			node:     node(alloc4k10k, nil, twentySamples()...),
			settings: testSettings(),
			wantCPU:  600, wantMem: 2500,
		},
		{
			name:     "rounding the margin up never over-publishes",
			node:     node(reclaimable.Resources{CPUMilli: 3333, MemoryBytes: 1001}, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) { s.Memory.Margin = 0.1 }),
			// margin ceil(3333x0.35 = 1166.55) = 1167 -> 2166; ceil(1001x0.1 = 100.1) = 101 -> 900
			wantCPU: 2166, wantMem: 900,
			cpuTerms: map[string]int64{"margin": 1167},
			memTerms: map[string]int64{"margin": 101},
		},
		{
			name: "a fractional cap rounds down",
			node: node(reclaimable.Resources{CPUMilli: 3333, MemoryBytes: 1001}, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) {
				s.CPU = ResourceSettings{Margin: 0, MaxRatio: 0.3}
				s.Memory = ResourceSettings{Margin: 0, MaxRatio: 0.5}
			}),
			// floor(3333x0.3 = 999.9) = 999; floor(1001x0.5 = 500.5) = 500
			wantCPU: 999, wantMem: 500,
			cpuTerms: map[string]int64{"cap": 999, "margin": 0},
			memTerms: map[string]int64{"cap": 500},
		},
		{
			name: "the cap limits the reclaimable share",
			node: node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) {
				s.CPU.MaxRatio = 0.5
				s.Memory.MaxRatio = 0.25
			}),
			// min(2600, 2000) = 2000; min(6500, 2500) = 2500
			wantCPU: 2000, wantMem: 2500,
		},
		{
			name:     "a cap above the result changes nothing",
			node:     node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) { s.CPU.MaxRatio = 0.65; s.Memory.MaxRatio = 0.66 }),
			// cap 2600 and 6600
			wantCPU: 2600, wantMem: 6500,
		},
		{
			name:     "a cap of zero publishes nothing",
			node:     node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) { s.CPU.MaxRatio = 0; s.Memory.MaxRatio = 0 }),
			wantCPU:  0, wantMem: 0,
		},
		{
			name: "a result below the minimum publishes zero and one equal to it is published",
			node: node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) {
				s.CPU.Minimum = 2601
				s.Memory.Minimum = 6500
			}),
			wantCPU: 0, wantMem: 6500,
			cpuTerms: map[string]int64{"minimum": 2601},
		},
		{
			name:     "a margin of zero reclaims everything not used",
			node:     node(alloc4k10k, nil, smp(15, 500, 1000)),
			settings: testSettings(func(s *Settings) { s.CPU.Margin = 0; s.Memory.Margin = 0 }),
			wantCPU:  3500, wantMem: 9000,
		},
		{
			name:     "a large node's memory does not overflow",
			node:     node(reclaimable.Resources{CPUMilli: 256000, MemoryBytes: 4 << 40}, nil, smp(15, 0, 0)),
			settings: testSettings(),
			// 4 TiB = 4398046511104; margin ceil(x0.35 = 1539316278886.4) = 1539316278887
			// 4398046511104 - 1539316278887 = 2858730232217; cpu 256000 - 89600 = 166400
			wantCPU: 166400, wantMem: 2858730232217,
			memTerms: map[string]int64{"margin": 1539316278887},
		},
		{
			name:     "a negative allocatable counts as zero",
			node:     node(reclaimable.Resources{CPUMilli: -1, MemoryBytes: -1}, nil, smp(15, 0, 0)),
			settings: testSettings(),
			wantCPU:  0, wantMem: 0,
			cpuTerms: map[string]int64{"allocatable": 0},
		},
		{
			name: "the request policy publishes allocatable minus regular requests",
			node: node(alloc4k10k, []Pod{
				regular("g1", 1000, 2000), regular("g2", 500, 500), reclaimedPod("r"),
			}),
			settings: testSettings(func(s *Settings) { s.Policy = PolicyRequest }),
			// no margin: 4000 - 1500 = 2500; 10000 - 2500 = 7500; no samples needed
			wantCPU: 2500, wantMem: 7500,
			cpuTerms: map[string]int64{"allocatable": 4000, "regular-requests": 1500, "cap": 4000},
			memTerms: map[string]int64{"regular-requests": 2500},
		},
		{
			name:     "the request policy ignores stale samples",
			node:     node(alloc4k10k, []Pod{regular("g1", 1000, 2000), regular("g2", 500, 500)}, smp(3600, 3000, 3000)),
			settings: testSettings(func(s *Settings) { s.Policy = PolicyRequest }),
			wantCPU:  2500, wantMem: 7500,
		},
		{
			name:     "the request policy floors requests above allocatable at zero",
			node:     node(alloc4k10k, []Pod{regular("big", 5000, 20000)}),
			settings: testSettings(func(s *Settings) { s.Policy = PolicyRequest }),
			wantCPU:  0, wantMem: 0,
		},
		{
			name: "the request policy applies the cap and the minimum",
			node: node(alloc4k10k, []Pod{regular("g1", 1000, 2000), regular("g2", 500, 500)}),
			settings: testSettings(func(s *Settings) {
				s.Policy = PolicyRequest
				s.CPU.MaxRatio = 0.5
				s.Memory.Minimum = 8000
			}),
			// min(2500, 2000) = 2000; 7500 < 8000 -> 0
			wantCPU: 2000, wantMem: 0,
		},
		{
			name:     "max-usage-request counts each measured regular pod at the larger of usage and request",
			node:     murNode(),
			settings: testSettings(func(s *Settings) { s.Policy = PolicyMaxUsageRequest }),
			// at 30s: pods cpu 500+200+1000=1700, system 3000-1700=1300, max(500,1000)+max(200,300)=1300 -> 2600
			//         pods mem 2000+100+1000=3100, system 6000-3100=2900, max(2000,1000)+max(100,4000)=6000 -> 8900
			// at 15s: pods cpu 1500+100+0=1600, system 400, max(1500,1000)+max(100,300)=1800 -> 2200
			//         pods mem 1500+100+0=1600, system 3400, max(1500,1000)+max(100,4000)=5500 -> 8900
			// 8000 - 2800 - 2600 = 2600; 20000 - 7000 - 8900 = 4100
			wantCPU: 2600, wantMem: 4100,
			cpuTerms: map[string]int64{"regular-peak-usage": 2600, "system-usage": 1300},
			memTerms: map[string]int64{"regular-peak-usage": 8900, "system-usage": 3400},
		},
		{
			name:     "the usage policy on the same node subtracts only the measured usage",
			node:     murNode(),
			settings: testSettings(),
			// regular: cpu 3000-1000=2000, 2000-0=2000; mem 6000-1000=5000, 5000-0=5000
			// 8000 - 2800 - 2000 = 3200; 20000 - 7000 - 5000 = 8000
			wantCPU: 3200, wantMem: 8000,
		},
		{
			name:     "max-usage-request counts unmeasured regular pods once, at their request",
			node:     node(alloc4k10k, []Pod{regular("new", 500, 1000)}, smp(15, 1000, 2000)),
			settings: testSettings(func(s *Settings) { s.Policy = PolicyMaxUsageRequest }),
			// system 1000 / 2000, no measured pod; 4000-1400-1000-500 = 1100; 10000-3500-2000-1000 = 3500
			wantCPU: 1100, wantMem: 3500,
			cpuTerms: map[string]int64{"regular-peak-usage": 1000, "unmeasured-requests": 500},
		},
		{
			name:       "max-usage-request publishes zero on stale samples",
			node:       murNode(),
			settings:   testSettings(func(s *Settings) { s.Policy = PolicyMaxUsageRequest }),
			staleAfter: 10 * time.Second,
			wantReason: ZeroReasonStale,
		},
		{
			name:     "a reclaimed pod sample within the alignment tolerance is subtracted",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(25, 1000, 1000))}, smp(30, 2000, 4000)),
			settings: testSettings(),
			// 4000-1400-1000 = 1600; 10000-3500-3000 = 3500
			wantCPU: 1600, wantMem: 3500,
		},
		{
			name:     "a reclaimed pod sample exactly at the alignment tolerance is subtracted",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(20, 1000, 1000))}, smp(30, 2000, 4000)),
			settings: testSettings(),
			wantCPU:  1600, wantMem: 3500,
		},
		{
			name:     "a reclaimed pod sample beyond the alignment tolerance is not subtracted",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(19, 1000, 1000))}, smp(30, 2000, 4000)),
			settings: testSettings(),
			// 4000-1400-2000 = 600; 10000-3500-4000 = 2500
			wantCPU: 600, wantMem: 2500,
		},
		{
			name:     "a wider alignment tolerance matches a further sample",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(19, 1000, 1000))}, smp(30, 2000, 4000)),
			settings: testSettings(func(s *Settings) { s.SampleAlignment = 15 * time.Second }),
			wantCPU:  1600, wantMem: 3500,
		},
		{
			name:     "a zero alignment tolerance means the ten second default",
			node:     node(alloc4k10k, []Pod{reclaimedPod("r", smp(20, 1000, 1000))}, smp(30, 2000, 4000)),
			settings: testSettings(func(s *Settings) { s.SampleAlignment = 0 }),
			wantCPU:  1600, wantMem: 3500,
		},
		{
			name: "the nearest pod sample is used",
			node: node(alloc4k10k, []Pod{reclaimedPod("r", smp(38, 500, 500), smp(27, 900, 900))},
				smp(30, 2000, 4000)),
			settings: testSettings(),
			// 27 s is nearer than 38 s: 2000-900 = 1100 -> 4000-1400-1100 = 1500; 4000-900=3100 -> 3400
			wantCPU: 1500, wantMem: 3400,
		},
		{
			name: "each node sample gets its own pod sample",
			node: node(alloc4k10k, []Pod{reclaimedPod("r", smp(60, 1900, 0), smp(30, 0, 3900))},
				smp(60, 2000, 4000), smp(30, 2000, 4000)),
			settings: testSettings(),
			// at 60 s: 2000-1900=100, 4000-0=4000; at 30 s: 2000-0=2000, 4000-3900=100
			// peaks 2000 and 4000: 4000-1400-2000 = 600; 10000-3500-4000 = 2500
			wantCPU: 600, wantMem: 2500,
		},
		{
			name: "unsorted samples are sorted before use",
			node: node(alloc4k10k, []Pod{reclaimedPod("r", smp(10, 200, 200), smp(200, 300, 300))},
				smp(10, 500, 1000), smp(200, 1000, 2000)),
			settings: testSettings(),
			// newest is 10 s old (fresh); regular at 200 s: 1000-300=700, 2000-300=1700; at 10 s: 300, 800
			// 4000-1400-700 = 1900; 10000-3500-1700 = 4800
			wantCPU: 1900, wantMem: 4800,
		},
		{
			name:       "an unknown policy publishes zero because the settings are invalid",
			node:       node(alloc4k10k, nil, smp(15, 0, 0)),
			settings:   testSettings(func(s *Settings) { s.Policy = "magic" }),
			wantReason: ZeroReasonInvalidSettings,
		},
		{
			name:     "an empty policy name means the usage policy",
			node:     node(alloc4k10k, nil, smp(15, 0, 0)),
			settings: testSettings(func(s *Settings) { s.Policy = "" }),
			wantCPU:  2600, wantMem: 6500,
		},
	}
}

func murNode() Node {
	return node(reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 20000}, []Pod{
		regular("g1", 1000, 1000, smp(30, 500, 2000), smp(15, 1500, 1500)),
		regular("g2", 300, 4000, smp(30, 200, 100), smp(15, 100, 100)),
		reclaimedPod("r", smp(30, 1000, 1000), smp(15, 0, 0)),
	}, smp(30, 3000, 6000), smp(15, 2000, 5000))
}

func TestCompute(t *testing.T) {
	shared := &Calculator{} // reused across every case: scratch must not leak
	for _, tc := range computeCases() {
		t.Run(tc.name, func(t *testing.T) {
			staleAfter := tc.staleAfter
			if staleAfter == 0 {
				staleAfter = 2 * time.Minute
			}
			before := slices.Clone(tc.node.Samples)
			for _, calc := range []struct {
				name string
				run  func() Result
			}{
				{"package", func() Result { return Compute(&tc.node, tc.settings, now, staleAfter) }},
				{"shared", func() Result { return shared.Compute(&tc.node, tc.settings, now, staleAfter) }},
			} {
				r := calc.run()
				if r.CPUMilli != tc.wantCPU || r.MemoryBytes != tc.wantMem || r.ZeroReason != tc.wantReason {
					t.Fatalf("%s: got cpu=%d mem=%d reason=%q, want cpu=%d mem=%d reason=%q\nexplanation: %+v",
						calc.name, r.CPUMilli, r.MemoryBytes, r.ZeroReason, tc.wantCPU, tc.wantMem, tc.wantReason, r.Explanation)
				}
				checkExplanation(t, "cpu", r.Explanation.CPU, r.CPUMilli, tc.cpuTerms)
				checkExplanation(t, "memory", r.Explanation.Memory, r.MemoryBytes, tc.memTerms)
				var newest time.Time
				for _, s := range tc.node.Samples {
					if s.Time.After(newest) {
						newest = s.Time
					}
				}
				if !r.MetricsTime.Equal(newest) {
					t.Errorf("MetricsTime = %v, want the newest sample %v", r.MetricsTime, newest)
				}
				wantPolicy := tc.settings.Policy
				if wantPolicy == "" {
					wantPolicy = PolicyUsage
				}
				if r.Policy != wantPolicy {
					t.Errorf("Policy = %q, want %q", r.Policy, wantPolicy)
				}
			}
			if !slices.Equal(before, tc.node.Samples) {
				t.Errorf("Compute modified the node's samples")
			}
		})
	}
}

func checkExplanation(t *testing.T, res string, e reclaimable.ResourceExplanation, result int64, want map[string]int64) {
	t.Helper()
	if e.Result != result {
		t.Errorf("%s: explanation result %d, published %d", res, e.Result, result)
	}
	if got := e.Evaluate(); got != result {
		t.Errorf("%s: the terms evaluate to %d, published %d: %+v", res, got, result, e.Terms)
	}
	for name, v := range want {
		found := false
		for _, term := range e.Terms {
			if term.Name == name {
				found = true
				if term.Value != v {
					t.Errorf("%s: term %s = %d, want %d", res, name, term.Value, v)
				}
			}
		}
		if !found {
			t.Errorf("%s: no term %s in %+v", res, name, e.Terms)
		}
	}
}

func TestExplanationTermsAreInOrder(t *testing.T) {
	names := func(e reclaimable.ResourceExplanation) []string {
		var out []string
		for _, term := range e.Terms {
			out = append(out, term.Name+" "+term.Op)
		}
		return out
	}
	usageTerms := []string{"allocatable =", "margin -", "regular-peak-usage -", "system-usage info",
		"unmeasured-requests -", "floor max", "cap min", "minimum minimum"}
	requestTerms := []string{"allocatable =", "regular-requests -", "floor max", "cap min", "minimum minimum"}
	cases := []struct {
		name   string
		policy PolicyName
		node   Node
		want   []string
	}{
		{"the usage policy explains every term in order", PolicyUsage, murNode(), usageTerms},
		{"the max-usage-request policy explains every term in order", PolicyMaxUsageRequest, murNode(), usageTerms},
		{"the request policy explains every term in order", PolicyRequest, murNode(), requestTerms},
		{"a stale node is explained by a single zero term", PolicyUsage,
			node(alloc4k10k, nil, smp(3600, 0, 0)), []string{"metrics-stale ="}},
		{"a node without samples is explained by a single zero term", PolicyUsage,
			node(alloc4k10k, nil), []string{"no-samples ="}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(&tc.node, testSettings(func(s *Settings) { s.Policy = tc.policy }), now, 2*time.Minute)
			for _, e := range []reclaimable.ResourceExplanation{r.Explanation.CPU, r.Explanation.Memory} {
				if got := names(e); !slices.Equal(got, tc.want) {
					t.Errorf("terms %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestExplanationNotes(t *testing.T) {
	n := node(alloc4k10k, []Pod{regular("new", 1, 1), regular("g", 1, 1, smp(15, 1, 1))}, smp(30, 0, 0), smp(15, 0, 0))
	r := Compute(&n, testSettings(func(s *Settings) { s.Peak = Percentile(95) }), now, 2*time.Minute)
	want := map[string]string{
		"margin":              "35% of allocatable kept unreclaimed",
		"regular-peak-usage":  "p95 over 5m0s of 2 samples: node usage minus reclaimed pods' usage (each at most its grant)",
		"unmeasured-requests": "requests of 1 regular pods without usage samples",
		"cap":                 "100% of allocatable at most",
	}
	for _, term := range r.Explanation.CPU.Terms {
		if w, ok := want[term.Name]; ok && term.Note != w {
			t.Errorf("note of %s = %q, want %q", term.Name, term.Note, w)
		}
	}
	stale := node(alloc4k10k, nil, smp(150, 0, 0))
	r = Compute(&stale, testSettings(), now, 2*time.Minute)
	if w := "newest node sample is 2m30s old (stale after 2m0s)"; r.Explanation.CPU.Terms[0].Note != w {
		t.Errorf("stale note %q, want %q", r.Explanation.CPU.Terms[0].Note, w)
	}
}

func TestPeakParsingAndFormatting(t *testing.T) {
	cases := []struct {
		in   string
		want Peak
		str  string
	}{
		{"max", PeakMax, "max"},
		{"p100", PeakMax, "max"},
		{"p95", 95000, "p95"},
		{"p99.9", 99900, "p99.9"},
		{"p99.99", 99990, "p99.99"},
		{"p0.001", 1, "p0.001"},
		{"p50.500", 50500, "p50.5"},
	}
	for _, tc := range cases {
		t.Run(tc.in+" parses and renders as "+tc.str, func(t *testing.T) {
			got, err := ParsePeak(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParsePeak(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
	for _, bad := range []string{"", "p", "p0", "p0.0", "p101", "p100.001", "p95.1234", "P95", "95", "pmax", "p-5", "p9 5", "p95.", "p.5", "maximum"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			if _, err := ParsePeak(bad); err == nil {
				t.Errorf("ParsePeak(%q) succeeded", bad)
			}
		})
	}
	if Percentile(99.9) != 99900 || Percentile(100) != PeakMax || Percentile(0) != 1 {
		t.Errorf("Percentile conversions wrong: %d %d %d", Percentile(99.9), Percentile(100), Percentile(0))
	}
}

func TestComputeAllocationsAreBounded(t *testing.T) {
	n := murNode()
	s := testSettings(func(s *Settings) { s.Peak = Percentile(95) })
	var c Calculator
	c.Compute(&n, s, now, 2*time.Minute) // warm the scratch buffers and notes
	allocs := testing.AllocsPerRun(100, func() { c.Compute(&n, s, now, 2*time.Minute) })
	if allocs > 1 {
		t.Errorf("a warm Calculator allocates %.0f times per node, want at most 1 (the explanation terms)", allocs)
	}
}
