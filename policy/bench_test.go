package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const (
	benchNodes   = 5000
	benchPods    = 30
	benchSamples = 20
	benchPeriod  = 15 * time.Second
)

// benchCluster builds 5000 nodes with 30 pods each (5 reclaimed), every node
// and pod with 20 samples 15 s apart; pod samples are 1 s off the node's so
// that alignment does real work.
func benchCluster() []Node {
	nodes := make([]Node, benchNodes)
	pods := make([]Pod, benchNodes*benchPods)
	samples := make([]Sample, benchNodes*(benchPods+1)*benchSamples)
	take := func() []Sample {
		s := samples[:benchSamples:benchSamples]
		samples = samples[benchSamples:]
		return s
	}
	for i := range nodes {
		n := &nodes[i]
		n.Name = fmt.Sprintf("node-%d", i)
		n.Capacity = reclaimable.Resources{CPUMilli: 32000, MemoryBytes: 128 << 30}
		n.Allocatable = reclaimable.Resources{CPUMilli: 31000, MemoryBytes: 120 << 30}
		n.Samples = take()
		for k := range n.Samples {
			n.Samples[k] = Sample{Time: now.Add(-time.Duration(benchSamples-1-k) * benchPeriod),
				CPUMilli: int64(8000 + (i*7+k*13)%4000), MemoryBytes: int64(40<<30 + (i*11+k*17)%(8<<30))}
		}
		n.Pods = pods[i*benchPods : (i+1)*benchPods : (i+1)*benchPods]
		for j := range n.Pods {
			p := &n.Pods[j]
			p.Namespace, p.Name, p.UID = "default", "pod", "uid"
			p.Reclaimed = j >= benchPods-5
			p.Requests = reclaimable.Resources{CPUMilli: 500, MemoryBytes: 2 << 30}
			p.StartTime = now.Add(-time.Hour)
			p.Samples = take()
			for k := range p.Samples {
				p.Samples[k] = Sample{Time: n.Samples[k].Time.Add(-time.Second),
					CPUMilli: int64(100 + (i+j*3+k*5)%400), MemoryBytes: int64(1<<30 + (i+j*7+k*3)%(1<<30))}
			}
		}
	}
	return nodes
}

// BenchmarkComputeCluster: one op is one full computation over every node.
func BenchmarkComputeCluster(b *testing.B) {
	nodes := benchCluster()
	for _, bc := range []struct {
		name string
		s    Settings
	}{
		{"usage-max", testSettings()},
		{"usage-p95", testSettings(func(s *Settings) { s.Peak = Percentile(95) })},
		{"max-usage-request-p95", testSettings(func(s *Settings) { s.Policy = PolicyMaxUsageRequest; s.Peak = Percentile(95) })},
		{"request", testSettings(func(s *Settings) { s.Policy = PolicyRequest })},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var c Calculator
			var sink int64
			b.ReportAllocs()
			for b.Loop() {
				for i := range nodes {
					r := c.Compute(&nodes[i], bc.s, now, 2*time.Minute)
					sink += r.CPUMilli + r.MemoryBytes
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/cycle")
			if sink == 0 {
				b.Fatal("nothing reclaimable: the benchmark data is wrong")
			}
		})
	}
}

// BenchmarkHistoryCycle: one op records one cycle of metrics (5000 nodes,
// 150,000 pods) and reads every series back into Node inputs, as the
// publisher does.
func BenchmarkHistoryCycle(b *testing.B) {
	h := NewHistory(6*time.Minute, benchSamples+1)
	uids := make([][]byte, benchNodes*benchPods)
	names := make([]string, benchNodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
	}
	for i := range uids {
		uids[i] = []byte(fmt.Sprintf("pod-%d", i))
	}
	buf := make([]Sample, 0, benchNodes*(benchPods+1)*(benchSamples+1))
	t := now
	cycle := func() {
		t = t.Add(benchPeriod)
		for i, n := range names {
			h.AddNode(n, Sample{Time: t, CPUMilli: int64(i), MemoryBytes: int64(i)})
		}
		for i, u := range uids {
			h.AddPod(u, Sample{Time: t, CPUMilli: int64(i), MemoryBytes: int64(i)})
		}
		buf = buf[:0]
		for _, n := range names {
			buf = h.AppendNode(buf, n)
		}
		for _, u := range uids {
			buf = appendPod(h, buf, u)
		}
	}
	for range benchSamples {
		cycle() // fill to steady state
	}
	b.ReportAllocs()
	for b.Loop() {
		cycle()
	}
}
