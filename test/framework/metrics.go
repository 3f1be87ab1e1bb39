package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// SumSamples returns the sum of every sample of the metric name in a
// Prometheus text exposition whose labels include every name, value pair of
// labels ("result", "error", ...). The _count and _sum series of a histogram
// or summary are addressed by their series names, and a histogram's
// _bucket series by its le label too ("le", "100": the cumulative count of
// observations up to 100). A metric that is absent sums to 0: a labelled
// counter has no series until it is first incremented.
func SumSamples(body io.Reader, name string, labels ...string) (float64, error) {
	if len(labels)%2 != 0 {
		return 0, fmt.Errorf("labels of %s must come in name, value pairs: %q", name, labels)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return 0, fmt.Errorf("parsing metrics: %w", err)
	}
	value := func(m *dto.Metric) float64 {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
		return 0
	}
	family, ok := families[name]
	if base, found := strings.CutSuffix(name, "_bucket"); !ok && found && families[base].GetType() == dto.MetricType_HISTOGRAM {
		le, rest, err := bucketBound(labels)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		family, ok, labels = families[base], true, rest
		// The series of a histogram share its bounds.
		if ms := family.GetMetric(); len(ms) > 0 && !math.IsInf(le, 1) && !slices.ContainsFunc(ms[0].GetHistogram().GetBucket(), func(b *dto.Bucket) bool { return b.GetUpperBound() == le }) {
			return 0, fmt.Errorf("%s has no bucket le=%v", name, le)
		}
		value = func(m *dto.Metric) float64 {
			for _, b := range m.GetHistogram().GetBucket() {
				if b.GetUpperBound() == le {
					return float64(b.GetCumulativeCount())
				}
			}
			return float64(m.GetHistogram().GetSampleCount()) // le=+Inf
		}
	}
	if !ok {
		for _, suffix := range []string{"_count", "_sum"} {
			base, found := strings.CutSuffix(name, suffix)
			f := families[base]
			if !found || f == nil || (f.GetType() != dto.MetricType_HISTOGRAM && f.GetType() != dto.MetricType_SUMMARY) {
				continue
			}
			family, ok = f, true
			value = func(m *dto.Metric) float64 {
				count, sum := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				if m.Summary != nil {
					count, sum = m.Summary.GetSampleCount(), m.Summary.GetSampleSum()
				}
				if suffix == "_count" {
					return float64(count)
				}
				return sum
			}
		}
	}
	if !ok {
		return 0, nil
	}
	var total float64
	for _, m := range family.GetMetric() {
		if hasLabels(m, labels) {
			total += value(m)
		}
	}
	return total, nil
}

// bucketBound takes the le pair out of labels and returns its bound.
func bucketBound(labels []string) (float64, []string, error) {
	for i := 0; i < len(labels); i += 2 {
		if labels[i] == "le" {
			le, err := strconv.ParseFloat(labels[i+1], 64)
			if err != nil {
				return 0, nil, fmt.Errorf("bucket bound %q: %w", labels[i+1], err)
			}
			return le, append(slices.Clone(labels[:i]), labels[i+2:]...), nil
		}
	}
	return 0, nil, errors.New("a _bucket series needs an le label")
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == pairs[i] && l.GetValue() == pairs[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// get GETs url with httpClient; its Timeout bounds the request.
func get(url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return httpClient.Do(req)
}

// ScrapeErr reads a metric (see SumSamples) of the role whose health server
// is on 127.0.0.1:port, from its /metrics over HTTPS with the bearer token
// registered for it (stack.ServingFlags, StartRole, stack.Start).
func ScrapeErr(port int, name string, labels ...string) (float64, error) {
	ep, ok := stack.MetricsOf(port)
	if !ok {
		return 0, fmt.Errorf("no metrics endpoint registered for the role with health port %d: start it with stack.ServingFlags", port)
	}
	ctx, cancel := context.WithTimeout(context.Background(), httpClient.Timeout)
	defer cancel()
	body, err := stack.GetMetrics(ctx, ep)
	if err != nil {
		return 0, err
	}
	return SumSamples(bytes.NewReader(body), name, labels...)
}

// Scrape is ScrapeErr that fails the test on an error.
func Scrape(t testing.TB, port int, name string, labels ...string) float64 {
	t.Helper()
	v, err := ScrapeErr(port, name, labels...)
	if err != nil {
		t.Fatalf("scraping %s on port %d: %v", name, port, err)
	}
	return v
}

// APIServerMetric reads a metric from kube-apiserver's /metrics.
func APIServerMetric(t testing.TB, c *cluster.Cluster, name string, labels ...string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	v, err := SumSamples(bytes.NewReader(body), name, labels...)
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	return v
}

// Ready reports whether the health server on 127.0.0.1:port answers /readyz
// with 200.
func Ready(port int) bool {
	ok, _ := probe(port, "/readyz")
	return ok
}

// Live reports whether the health server on 127.0.0.1:port answers /healthz
// with 200, and otherwise what it answered.
func Live(port int) (bool, string) { return probe(port, "/healthz") }

func probe(port int, path string) (bool, string) {
	resp, err := get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body)
}
