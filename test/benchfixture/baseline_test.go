package benchfixture

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The baseline reads the whole body and answers an allowed AdmissionReview;
// DiscardWriter sees the status a handler writes, 200 when it writes none.
func TestBaselineAnswersAllowedAfterReadingTheBody(t *testing.T) {
	body := strings.NewReader(string(RealisticReview(reclaimable.MustNames(reclaimable.DefaultDomain), time.Now(), true)))
	rec := httptest.NewRecorder()
	BaselineHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/any", body))
	var rv struct {
		Kind     string `json:"kind"`
		Response struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &rv); err != nil || rec.Code != http.StatusOK || rv.Kind != "AdmissionReview" || !rv.Response.Allowed {
		t.Errorf("baseline answered %d %s (err %v)", rec.Code, rec.Body, err)
	}
	if body.Len() != 0 {
		t.Errorf("baseline left %d bytes of the body unread", body.Len())
	}

	w := &DiscardWriter{}
	BaselineHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/any", strings.NewReader("{}")))
	if w.Code != http.StatusOK || w.N != len(baselineAnswer) || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("DiscardWriter saw code %d, %d bytes, header %v", w.Code, w.N, w.Header())
	}
	w.Code = 0
	http.Error(w, "no", http.StatusTeapot)
	if w.Code != http.StatusTeapot {
		t.Errorf("DiscardWriter saw code %d, want %d", w.Code, http.StatusTeapot)
	}
}
