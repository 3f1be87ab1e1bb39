package publisher

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// collect reads NodeMetrics and PodMetrics once and appends new samples to
// the history. On failure the history simply stops growing: nodes go stale
// and are published as zero after --metrics-stale-after.
func (p *Publisher) collect(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(p.opts.Period, 10*time.Second))
	defer cancel()
	// Keep the longest window in force plus the stale bound. A reload that
	// changes it starts a new history: the next samples arrive within one
	// period, so nothing goes stale, the peak just looks at less for a while.
	age := p.config.Load().MaxWindow() + p.opts.MetricsStaleAfter
	if p.hist == nil || age != p.histAge {
		// metrics-server cannot scrape more often than every 10 s.
		p.hist, p.histAge = policy.NewHistory(age, int(age/(10*time.Second))+2), age
	}
	now := time.Now()
	defer p.hist.Prune(now)

	nm, err := p.metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		p.m.metricsErrors.Inc()
		logrus.WithError(err).Warn("reading node metrics")
	} else {
		for i := range nm.Items {
			m := &nm.Items[i]
			p.hist.AddNode(m.Name, policy.Sample{Time: m.Timestamp.Time, CPUMilli: m.Usage.Cpu().MilliValue(), MemoryBytes: m.Usage.Memory().Value()})
		}
	}
	pm, err := p.metrics.MetricsV1beta1().PodMetricses(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.m.metricsErrors.Inc()
		logrus.WithError(err).Warn("reading pod metrics")
		return
	}
	for i := range pm.Items {
		m := &pm.Items[i]
		var cpu, mem int64
		for _, c := range m.Containers {
			cpu += c.Usage.Cpu().MilliValue()
			mem += c.Usage.Memory().Value()
		}
		p.hist.AddPod(podKey(m.Namespace, m.Name), policy.Sample{Time: m.Timestamp.Time, CPUMilli: cpu, MemoryBytes: mem})
	}
}

// podKey names a pod's series: PodMetrics carry no UID, so namespace/name.
func podKey(ns, name string) string { return ns + "/" + name }

func metav1ObjectMeta(pod *corev1.Pod) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, Labels: nil,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp}
}
