package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// metricsTarget is a role's /metrics (HTTPS) and a bearer token allowed to
// read it.
type metricsTarget struct{ url, token string }

// scrape reads the Prometheus text exposition served at t.
func scrape(ctx context.Context, t metricsTarget) (map[string]*dto.MetricFamily, error) {
	code, body, err := stack.GetHTTPS(ctx, t.url, t.token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", t.url, code, body)
	}
	return parseExposition(bytes.NewReader(body))
}

func parseExposition(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// sumCounters is the sum of every series of a counter family.
func sumCounters(families map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

// histogramCount is the number of observations of every series of a
// histogram family.
func histogramCount(families map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		total += float64(m.GetHistogram().GetSampleCount())
	}
	return total
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
