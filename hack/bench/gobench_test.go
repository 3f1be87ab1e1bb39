package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseBenchLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		line   string
		want   benchLine
		wantOK bool
	}{
		{
			name: "standard and custom metrics, procs suffix stripped",
			line: "BenchmarkHandler/patch-2   \t    5000\t     61234 ns/op\t   0.04321 cpu-ns/op\t  33201 B/op\t      12 allocs/op",
			want: benchLine{Name: "BenchmarkHandler/patch", Procs: 2, N: 5000,
				Metrics: map[string]float64{"ns/op": 61234, "cpu-ns/op": 0.04321, "B/op": 33201, "allocs/op": 12}},
			wantOK: true,
		},
		{
			name: "a dash inside a sub-benchmark name stays",
			line: "BenchmarkComputeCluster/max-usage-request-p95-8  5  79145330 ns/op",
			want: benchLine{Name: "BenchmarkComputeCluster/max-usage-request-p95", Procs: 8, N: 5,
				Metrics: map[string]float64{"ns/op": 79145330}},
			wantOK: true,
		},
		{
			name: "an equals sign and a percent sign in the name",
			line: "BenchmarkCycleWrites/noise=10%-2  1  2.551 writes/node/interval",
			want: benchLine{Name: "BenchmarkCycleWrites/noise=10%", Procs: 2, N: 1,
				Metrics: map[string]float64{"writes/node/interval": 2.551}},
			wantOK: true,
		},
		{
			name:   "no procs suffix (GOMAXPROCS 1) keeps the whole name",
			line:   "BenchmarkAssume  1000  812 ns/op",
			want:   benchLine{Name: "BenchmarkAssume", Procs: 1, N: 1000, Metrics: map[string]float64{"ns/op": 812}},
			wantOK: true,
		},
		{
			name:   "exponent notation",
			line:   "BenchmarkX-2  3  1.5e+09 ns/op",
			want:   benchLine{Name: "BenchmarkX", Procs: 2, N: 3, Metrics: map[string]float64{"ns/op": 1.5e9}},
			wantOK: true,
		},
		{name: "a benchmark's log line is not a result", line: "    bench_test.go:42: building 5000 nodes"},
		{name: "a name without results (verbose start line) is not a result", line: "BenchmarkHandler"},
		{name: "a failed benchmark's line is not a result", line: "--- FAIL: BenchmarkCycle/metrics=json"},
		{name: "an odd metric pair is not a result", line: "BenchmarkX-2  3  15 ns/op 7"},
		{name: "a non-numeric count is not a result", line: "BenchmarkX-2  many  15 ns/op"},
		{name: "PASS is not a result", line: "PASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseBenchLine(tc.line)
			if ok != tc.wantOK {
				t.Fatalf("parseBenchLine(%q) ok = %v, want %v", tc.line, ok, tc.wantOK)
			}
			if ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseBenchLine(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
		})
	}
}

func TestParseBenchAttributesResultsToTheirPackage(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/kube-reclaim/kube-reclaim/webhook
cpu: Intel(R) Xeon(R) Processor
BenchmarkHandler/patch-2         	    5000	     61234 ns/op	     43210 cpu-ns/op
BenchmarkHandler/baseline-2      	    5000	      2000 ns/op	      1500 cpu-ns/op
PASS
ok  	github.com/kube-reclaim/kube-reclaim/webhook	3.1s
goos: linux
pkg: github.com/kube-reclaim/kube-reclaim/extender
BenchmarkFilterPrioritize/nodes=500-2   2000  250000 ns/op  310000 both-p99-ns
some log line from a benchmark
PASS
`
	lines, err := parseBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("parsed %d results, want 3: %+v", len(lines), lines)
	}
	for _, tc := range []struct{ pkg, name, metric string }{
		{"/webhook", "BenchmarkHandler/patch", "cpu-ns/op"},
		{"/webhook", "BenchmarkHandler/baseline", "cpu-ns/op"},
		{"/extender", "BenchmarkFilterPrioritize/nodes=500", "both-p99-ns"},
	} {
		l, ok := findBench(lines, tc.pkg, tc.name)
		if !ok {
			t.Errorf("%s %s not found", tc.pkg, tc.name)
			continue
		}
		if _, ok := l.Metrics[tc.metric]; !ok {
			t.Errorf("%s %s has no %s: %v", tc.pkg, tc.name, tc.metric, l.Metrics)
		}
	}
	if _, ok := findBench(lines, "/extender", "BenchmarkHandler/patch"); ok {
		t.Error("a webhook result was found under the extender package")
	}
}
