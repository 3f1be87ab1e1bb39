package publisher

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
)

// collect reads NodeMetrics and PodMetrics once and appends new samples to
// the history. On failure the history simply stops growing: nodes go stale
// and are published as zero after --metrics-stale-after.
func (p *Publisher) collect(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(p.opts.Period, 10*time.Second))
	defer cancel()
	// Keep what the policy in force reads; a reload that changes how far
	// back that is starts a new history.
	p.assembler.Resize(policyinput.HistoryAge(p.config.Load(), p.opts.MetricsStaleAfter), policyinput.MinScrapeInterval)
	now := time.Now()
	defer p.assembler.Prune(now)

	if _, err := p.assembler.ReadNodeMetrics(ctx, p.metrics, metav1.ListOptions{}); err != nil {
		p.m.metricsErrors.Inc()
		logrus.WithError(err).Warn("reading node metrics")
	}
	if _, err := p.assembler.ReadPodMetrics(ctx, p.metrics); err != nil {
		p.m.metricsErrors.Inc()
		logrus.WithError(err).Warn("reading pod metrics")
	}
}
