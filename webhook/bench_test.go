package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/benchfixture"
	"github.com/kube-reclaim/kube-reclaim/test/cputime"
)

// benchServe runs h on body b.N times, reusing the request.
func benchServe(b *testing.B, h http.Handler, body []byte) { benchServeAt(b, h, Path, body) }

// benchServeAt is benchServe on the route path.
func benchServeAt(b *testing.B, h http.Handler, path string, body []byte) {
	b.Helper()
	rd := bytes.NewReader(body)
	req, err := http.NewRequest(http.MethodPost, "https://webhook"+path, io.NopCloser(rd))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	w := &benchfixture.DiscardWriter{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, ok := cputime.Process()
	for i := 0; i < b.N; i++ {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w.Code = 0
		h.ServeHTTP(w, req)
		if w.Code != 0 && w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
	b.StopTimer()
	// ns/op is wall time; on a busy machine the process's own CPU time per
	// review (garbage collection included) is the figure to compare with
	// goal P1.
	if cpu1, ok1 := cputime.Process(); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkHandler measures the CPU per review of the whole handler (router,
// request metrics, body read, decode, patch, answer) on RealisticReview, side
// by side with the baseline that only reads the body. Goal P1
// (docs/design.md#p1-webhook, hack/bench/goals.go).
func BenchmarkHandler(b *testing.B) {
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	now := time.Now()
	for _, c := range []struct {
		name       string
		needsPatch bool
	}{{"patch", true}, {"unchanged", false}} {
		body := benchfixture.RealisticReview(names, now, c.needsPatch)
		b.Run(c.name, func(b *testing.B) {
			h := NewHandler(names, reclaimable.DefaultStaleAfter, nil, prometheus.NewRegistry())
			benchServe(b, h, body)
		})
	}
	b.Run("baseline", func(b *testing.B) {
		benchServe(b, benchfixture.BaselineHandler(), benchfixture.RealisticReview(names, now, true))
	})
}

// BenchmarkBaselineHandler is the baseline alone, for benchstat comparisons.
func BenchmarkBaselineHandler(b *testing.B) {
	benchServe(b, benchfixture.BaselineHandler(), benchfixture.RealisticReview(reclaimable.MustNames(reclaimable.DefaultDomain), time.Now(), true))
}

// BenchmarkHTTPSServer drives the real TLS server (serving.Serve,
// serving.TLSConfig) with keep-alive clients in parallel, the webhook next to
// the baseline, client and server in one process: the throughput ratio of
// the two is an estimate of goal P1's throughput ratio on this machine. The
// load command measures it properly, at fixed rates.
func BenchmarkHTTPSServer(b *testing.B) {
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	body := benchfixture.RealisticReview(names, time.Now(), true)
	certs, err := certauthority.NewSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CABundle())
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"webhook", NewHandler(names, reclaimable.DefaultStaleAfter, nil, prometheus.NewRegistry())},
		{"baseline", benchfixture.BaselineHandler()},
	} {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- serving.Serve(ctx, serving.NewServer(ln.Addr().String(), c.h), ln, serving.TLSConfig(certs.GetCertificate))
			}()
			defer func() { cancel(); <-done }() //nolint:errcheck // the serve error was checked by the benchmark
			client := &http.Client{Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
				MaxIdleConnsPerHost: 64,
			}}
			defer client.CloseIdleConnections()
			url := "https://" + ln.Addr().String() + Path
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			cpu0, ok := cputime.Process()
			defer func() {
				// Client and server CPU per review, TLS included.
				if cpu1, ok1 := cputime.Process(); ok && ok1 {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
				}
			}()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("status %d", res.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDecodeReview compares ways to decode RealisticReview, decoding
// only, with the CPU per review: what the handler does (json-iterator into
// admissionReview[nodeObject]) next to the alternatives README.md discusses.
func BenchmarkDecodeReview(b *testing.B) {
	body := benchfixture.RealisticReview(reclaimable.MustNames(reclaimable.DefaultDomain), time.Now(), true)
	twoStep := func(unmarshal func([]byte, any) error) func() error {
		return func() error {
			var rv admissionv1.AdmissionReview
			if err := unmarshal(body, &rv); err != nil {
				return err
			}
			var n nodeObject
			return unmarshal(rv.Request.Object.Raw, &n)
		}
	}
	for _, c := range []struct {
		name   string
		decode func() error
	}{
		{"jsoniter-slim", func() error { var rv admissionReview[nodeObject]; return reviewJSON.Unmarshal(body, &rv) }},
		{"jsoniter-admissionv1-then-object", twoStep(reviewJSON.Unmarshal)},
		{"encoding-json-slim", func() error { var rv admissionReview[nodeObject]; return json.Unmarshal(body, &rv) }},
		{"encoding-json-admissionv1-then-object", twoStep(json.Unmarshal)},
		{"encoding-json-valid-only", func() error {
			if !json.Valid(body) {
				return errors.New("invalid")
			}
			return nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			cpu0, ok := cputime.Process()
			for i := 0; i < b.N; i++ {
				if err := c.decode(); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, ok1 := cputime.Process(); ok && ok1 {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
