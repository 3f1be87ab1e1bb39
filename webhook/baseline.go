package webhook

import (
	"io"
	"net/http"
	"strconv"
)

var baselineAnswer = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}`)

// NewBaselineHandler returns the yardstick of the performance goal P1: a
// handler that only reads the request body and answers a constant allowed
// AdmissionReview, on any path. Benchmarks and the load command serve it side
// by side with the real handler.
func NewBaselineHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(baselineAnswer)))
		_, _ = w.Write(baselineAnswer)
	})
}
