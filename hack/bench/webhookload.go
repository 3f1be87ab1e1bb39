package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/benchfixture"
	"github.com/kube-reclaim/kube-reclaim/test/cputime"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// webhookConfig drives the P1 load: each target rate (0 = as fast as the
// connections go) for stepDuration, on conns keep-alive HTTP/1.1 connections.
type webhookConfig struct {
	rates        []float64
	stepDuration time.Duration
	conns        int
	rounds       int
	unchanged    bool
	cpuReviews   int
}

func (c *webhookConfig) flags(fs *flag.FlagSet) {
	rates := "500,1000,2000,4000,max"
	fs.Func("rates", "comma-separated target rates in reviews/s; max is a closed loop (default "+rates+")", func(s string) error {
		r, err := parseRates(s)
		c.rates = r
		return err
	})
	c.rates, _ = parseRates(rates)
	fs.DurationVar(&c.stepDuration, "step", 3*time.Second, "duration of each rate step per server (the request count is rate × step)")
	fs.IntVar(&c.conns, "conns", 8, "keep-alive connections per server (the apiserver keeps a pool of them too)")
	fs.IntVar(&c.rounds, "rounds", 3, "each step alternates between webhook and baseline this many times (step/rounds each), so background load hits both alike")
	fs.BoolVar(&c.unchanged, "unchanged", false, "post the review whose node needs no patch instead of the one that does")
	fs.IntVar(&c.cpuReviews, "cpu-reviews", 3000, "reviews for the in-process CPU-per-review measure")
}

// parseRates reads "500,1000,max"; max is 0.
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			out = append(out, 0)
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("rate %q is neither a positive number nor max", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no rates")
	}
	return out, nil
}

// loadStep is one rate step against one server.
type loadStep struct {
	Target     float64 `json:"target"` // 0: max
	Sent       int     `json:"sent"`
	OK         int     `json:"ok"`
	Errors     int     `json:"errors"`
	Unsent     int     `json:"unsent,omitempty"` // not sent in time: the server fell behind
	Throughput float64 `json:"throughput"`
	P50ms      float64 `json:"p50Ms"`
	P99ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
	FirstError string  `json:"firstError,omitempty"`
}

// webhookResult is the outcome of `bench webhook`.
type webhookResult struct {
	ReviewBytes int        `json:"reviewBytes"`
	Conns       int        `json:"conns"`
	Webhook     []loadStep `json:"webhook"`
	Baseline    []loadStep `json:"baseline"`
	// HandlerCPUms and BaselineCPUms are process CPU per review of each handler alone,
	// in process (no TLS, no network).
	HandlerCPUms  float64 `json:"handlerCpuMs"`
	BaselineCPUms float64 `json:"baselineCpuMs"`
}

// step returns the steps for a target rate.
func (r *webhookResult) step(target float64) (w, b *loadStep) {
	for i := range r.Webhook {
		if r.Webhook[i].Target == target {
			w, b = &r.Webhook[i], &r.Baseline[i]
		}
	}
	return w, b
}

// tlsServer serves h over TLS on a loopback port until ctx ends.
type tlsServer struct {
	url  string
	done chan error
}

func startTLSServer(ctx context.Context, h http.Handler, certs *certauthority.SelfSigned) (*tlsServer, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &tlsServer{url: "https://" + ln.Addr().String() + webhook.Path, done: make(chan error, 1)}
	go func() {
		s.done <- serving.Serve(ctx, serving.NewServer(ln.Addr().String(), h), ln, serving.TLSConfig(certs.GetCertificate))
	}()
	return s, nil
}

// newClient returns an HTTP/1.1 keep-alive client trusting pool, with at
// most conns connections.
func newClient(pool *x509.CertPool, conns int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			ForceAttemptHTTP2:   false,
			// A non-nil empty map keeps the transport on HTTP/1.1.
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
		},
	}
}

func post(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", res.StatusCode)
	}
	return err
}

// chunk is the raw outcome of driving one server for a while.
type chunk struct {
	sent, ok, errors, unsent int
	firstError               string
	lat                      []time.Duration
	// busy is from the first request due to the last answer.
	busy time.Duration
}

// stepOf merges the chunks of one server at one target rate.
func stepOf(target float64, chunks []chunk) loadStep {
	st := loadStep{Target: target}
	var lat []time.Duration
	var busy time.Duration
	for _, c := range chunks {
		st.Sent += c.sent
		st.OK += c.ok
		st.Errors += c.errors
		st.Unsent += c.unsent
		if st.FirstError == "" {
			st.FirstError = c.firstError
		}
		lat = append(lat, c.lat...)
		busy += c.busy
	}
	if busy > 0 {
		st.Throughput = float64(st.OK) / busy.Seconds()
	}
	s := summarize(lat)
	st.P50ms, st.P99ms, st.MaxMs = ms(s.P50), ms(s.P99), ms(s.Max)
	return st
}

// runChunk drives one server for d at a target rate (open loop: requests
// are due at fixed times and latency counts from the due time, so a server
// that falls behind shows it in the percentiles) or, for target 0, as fast as
// conns closed-loop workers go.
func runChunk(ctx context.Context, client *http.Client, url string, body []byte, target float64, d time.Duration, conns int) chunk {
	var (
		c        chunk
		mu       sync.Mutex
		lastDone time.Time
	)
	record := func(due time.Time, err error) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		c.sent++
		if err != nil {
			c.errors++
			if c.firstError == "" {
				c.firstError = err.Error()
			}
			return
		}
		c.ok++
		c.lat = append(c.lat, now.Sub(due))
		lastDone = now
	}
	start := time.Now()
	var wg sync.WaitGroup
	if target == 0 {
		end := start.Add(d)
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) && ctx.Err() == nil {
					t := time.Now()
					record(t, post(ctx, client, url, body))
				}
			}()
		}
		wg.Wait()
	} else {
		n := int(target * d.Seconds())
		due := make(chan time.Time, n)
		// Requests more than a chunk late are not sent: the count stays
		// bounded and so does the time.
		deadline := start.Add(2*d + 5*time.Second)
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for t := range due {
					if time.Now().After(deadline) || ctx.Err() != nil {
						mu.Lock()
						c.unsent++
						mu.Unlock()
						continue
					}
					record(t, post(ctx, client, url, body))
				}
			}()
		}
		interval := time.Duration(float64(time.Second) / target)
		for i := 0; i < n && ctx.Err() == nil; {
			now := time.Now()
			for ; i < n; i++ {
				t := start.Add(time.Duration(i) * interval)
				if t.After(now) {
					break
				}
				due <- t
			}
			if i < n {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
			}
		}
		close(due)
		wg.Wait()
	}
	c.busy = lastDone.Sub(start)
	return c
}

// cpuPerReview serves body n times straight into h and returns the process
// CPU per review (garbage collection included).
func cpuPerReview(ctx context.Context, h http.Handler, body []byte, n int) (time.Duration, error) {
	rd := bytes.NewReader(body)
	w := &benchfixture.DiscardWriter{}
	serve := func() error {
		rd.Reset(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://webhook"+webhook.Path, io.NopCloser(rd))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = int64(len(body))
		w.Code = 0
		h.ServeHTTP(w, req)
		if w.Code != 0 && w.Code != http.StatusOK {
			return fmt.Errorf("handler answered %d", w.Code)
		}
		return nil
	}
	for range min(n/10+1, 200) { // warm the pools
		if err := serve(); err != nil {
			return 0, err
		}
	}
	c0, _ := cputime.Process()
	for range n {
		if err := serve(); err != nil {
			return 0, err
		}
	}
	c1, _ := cputime.Process()
	return (c1 - c0) / time.Duration(n), nil
}

// runWebhook is `bench webhook`.
func runWebhook(ctx context.Context, cfg webhookConfig, out io.Writer) (*webhookResult, error) {
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	body := benchfixture.RealisticReview(names, time.Now(), !cfg.unchanged)
	res := &webhookResult{ReviewBytes: len(body), Conns: cfg.conns}
	certs, err := certauthority.NewSelfSigned([]string{"127.0.0.1"})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CABundle())

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	wh, err := startTLSServer(sctx, webhook.NewHandler(names, reclaimable.DefaultStaleAfter, nil, prometheus.NewRegistry()), certs)
	if err != nil {
		return nil, err
	}
	base, err := startTLSServer(sctx, benchfixture.BaselineHandler(), certs)
	if err != nil {
		return nil, err
	}
	kind := "needs a patch"
	if cfg.unchanged {
		kind = "needs no patch"
	}
	fmt.Fprintf(out, "P1 webhook load: AdmissionReview of %d bytes (%s), HTTPS keep-alive HTTP/1.1, %d connections per server, %s per step in %d alternating rounds, client and servers in this process on 127.0.0.1\n",
		len(body), kind, cfg.conns, cfg.stepDuration, max(cfg.rounds, 1))
	wc, bc := newClient(pool, cfg.conns), newClient(pool, cfg.conns)
	defer wc.CloseIdleConnections()
	defer bc.CloseIdleConnections()
	// Warm up: open every connection and let both servers reach steady state.
	for _, s := range []struct {
		c   *http.Client
		url string
	}{{wc, wh.url}, {bc, base.url}} {
		if c := runChunk(ctx, s.c, s.url, body, 0, 500*time.Millisecond, cfg.conns); c.ok == 0 {
			return nil, fmt.Errorf("warm-up against %s failed: %s", s.url, c.firstError)
		}
	}
	// Each step alternates between the two servers in rounds, so that
	// whatever else the machine does at the time weighs on both alike.
	rounds := max(cfg.rounds, 1)
	for _, rate := range cfg.rates {
		var wcs, bcs []chunk
		for range rounds {
			wcs = append(wcs, runChunk(ctx, wc, wh.url, body, rate, cfg.stepDuration/time.Duration(rounds), cfg.conns))
			bcs = append(bcs, runChunk(ctx, bc, base.url, body, rate, cfg.stepDuration/time.Duration(rounds), cfg.conns))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		res.Webhook = append(res.Webhook, stepOf(rate, wcs))
		res.Baseline = append(res.Baseline, stepOf(rate, bcs))
	}
	stop()
	for _, s := range []*tlsServer{wh, base} {
		if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return nil, err
		}
	}
	hc, err := cpuPerReview(ctx, webhook.NewHandler(names, reclaimable.DefaultStaleAfter, nil, prometheus.NewRegistry()), body, cfg.cpuReviews)
	if err != nil {
		return nil, err
	}
	bcpu, err := cpuPerReview(ctx, benchfixture.BaselineHandler(), body, cfg.cpuReviews)
	if err != nil {
		return nil, err
	}
	res.HandlerCPUms, res.BaselineCPUms = ms(hc), ms(bcpu)
	printWebhook(out, res)
	return res, nil
}

func rateLabel(r float64) string {
	if r == 0 {
		return "max"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

func printWebhook(out io.Writer, r *webhookResult) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\twebhook req/s\tp50 ms\tp99 ms\terrors\t\tbaseline req/s\tp50 ms\tp99 ms\terrors\t")
	for i := range r.Webhook {
		w, b := r.Webhook[i], r.Baseline[i]
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%d\t\t%.0f\t%.2f\t%.2f\t%d\t\n", rateLabel(w.Target),
			w.Throughput, w.P50ms, w.P99ms, w.Errors+w.Unsent, b.Throughput, b.P50ms, b.P99ms, b.Errors+b.Unsent)
	}
	tw.Flush()
	if w, b := r.step(0); w != nil && b.Throughput > 0 {
		fmt.Fprintf(out, "max throughput ratio webhook/baseline: %.2f (goal %s)\n", w.Throughput/b.Throughput, goals.WebhookThroughput)
	}
	if w, b := r.step(2000); w != nil {
		fmt.Fprintf(out, "p99 at 2000/s: webhook %.2f ms, baseline %.2f ms (goal %s)\n", w.P99ms, b.P99ms, goals.WebhookP99)
	}
	fmt.Fprintf(out, "handler CPU per review, in process: %.3f ms (baseline %.3f ms; goal %s)\n", r.HandlerCPUms, r.BaselineCPUms, goals.WebhookCPU)
	for _, s := range append(append([]loadStep{}, r.Webhook...), r.Baseline...) {
		if s.FirstError != "" {
			fmt.Fprintf(out, "first error at %s: %s\n", rateLabel(s.Target), s.FirstError)
			break
		}
	}
}
