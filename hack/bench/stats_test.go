package main

import (
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values give zero", nil, 99, 0},
		{"one value is every percentile", []time.Duration{7}, 50, 7},
		{"one value is p99 too", []time.Duration{7}, 99, 7},
		{"median of an odd count is the middle", []time.Duration{1, 2, 3, 4, 5}, 50, 3},
		{"median of an even count is the lower middle", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p99 of 100 values is the 99th", hundred, 99, 99 * time.Millisecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Millisecond},
		{"p99 of 10 values is the maximum", hundred[:10], 99, 10 * time.Millisecond},
		{"a tiny percentile is the minimum", hundred, 0.001, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%d values, %v) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	in := []time.Duration{5, 1, 4, 2, 3}
	s := summarize(in)
	if s.N != 5 || s.P50 != 3 || s.P99 != 5 || s.Max != 5 {
		t.Errorf("summarize = %+v, want N 5, p50 3, p99 5, max 5", s)
	}
	if in[0] != 5 || in[1] != 1 {
		t.Errorf("summarize reordered its input: %v", in)
	}
	if z := summarize(nil); z != (latencySummary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", z)
	}
}

func TestParseRates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []float64
		wantErr bool
	}{
		{"numbers and max, max as zero", "500, 1000,max", []float64{500, 1000, 0}, false},
		{"fractional rate", "2.5", []float64{2.5}, false},
		{"zero is refused", "0", nil, true},
		{"words other than max are refused", "fast", nil, true},
		{"empty item is refused", "500,,max", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRates(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseRates(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if len(got) != len(tc.want) && !tc.wantErr {
				t.Fatalf("parseRates(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("parseRates(%q) = %v, want %v", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestStepOfMergesChunks(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name           string
		chunks         []chunk
		wantOK, wantEr int
		wantThroughput float64
		wantP99        float64
		wantFirstError string
	}{
		{
			name: "throughput is answers over busy time summed across rounds",
			chunks: []chunk{
				{sent: 100, ok: 100, lat: repeat(ms, 100), busy: time.Second},
				{sent: 300, ok: 300, lat: repeat(2*ms, 300), busy: time.Second},
			},
			wantOK: 400, wantThroughput: 200, wantP99: 2,
		},
		{
			name: "errors count as sent but not as answered, first error kept",
			chunks: []chunk{
				{sent: 10, ok: 8, errors: 2, firstError: "boom", lat: repeat(ms, 8), busy: time.Second},
				{sent: 10, ok: 9, errors: 1, firstError: "later", lat: repeat(ms, 9), busy: time.Second},
			},
			wantOK: 17, wantEr: 3, wantThroughput: 8.5, wantP99: 1, wantFirstError: "boom",
		},
		{
			name:   "nothing answered gives zero throughput",
			chunks: []chunk{{sent: 5, errors: 5, firstError: "refused"}},
			wantEr: 5, wantFirstError: "refused",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := stepOf(1000, tc.chunks)
			if st.OK != tc.wantOK || st.Errors != tc.wantEr || st.Throughput != tc.wantThroughput || st.P99ms != tc.wantP99 || st.FirstError != tc.wantFirstError {
				t.Errorf("stepOf = %+v, want ok %d errors %d throughput %v p99 %v first error %q",
					st, tc.wantOK, tc.wantEr, tc.wantThroughput, tc.wantP99, tc.wantFirstError)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}
