package benchfixture

import (
	"io"
	"net/http"
	"strconv"
)

var baselineAnswer = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}`)

// BaselineHandler returns the yardstick of the performance goal P1: a handler
// that only reads the request body and answers a constant allowed
// AdmissionReview, on any path. Benchmarks and the load command serve it side
// by side with the real handler.
func BaselineHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(baselineAnswer)))
		_, _ = w.Write(baselineAnswer)
	})
}

// DiscardWriter is a ResponseWriter that keeps only the status code and the
// number of bytes written, so that a benchmark measures the handler and not
// httptest.ResponseRecorder's buffer growth. Set Code to 0 to reuse it.
type DiscardWriter struct {
	Code int // the status written, http.StatusOK once a body is written without one
	N    int // the bytes written
	h    http.Header
}

func (w *DiscardWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *DiscardWriter) WriteHeader(code int) { w.Code = code }

func (w *DiscardWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	w.N += len(b)
	return len(b), nil
}
