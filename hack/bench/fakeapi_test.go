package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The fake API pages lists like kube-apiserver: by limit and continue,
// except at resourceVersion "0", which comes whole.
func TestFakeAPIPagesLikeTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		query          string
		from, to       int
		whole          bool
		wantContinuing string
	}{
		{"", 0, 1234, true, ""},
		{"?resourceVersion=0&limit=500", 0, 1234, true, ""},
		{"?limit=500", 0, 500, false, "500"},
		{"?limit=500&continue=1000", 1000, 1234, false, ""},
		{"?resourceVersion=0&limit=500&continue=500", 500, 1000, false, "1000"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods"+tc.query, nil)
		from, to, whole := page(r, 1234)
		if from != tc.from || to != tc.to || whole != tc.whole || next(to, 1234) != tc.wantContinuing {
			t.Errorf("%q: [%d,%d) whole=%v continue %q, want [%d,%d) whole=%v continue %q",
				tc.query, from, to, whole, next(to, 1234), tc.from, tc.to, tc.whole, tc.wantContinuing)
		}
	}
}
