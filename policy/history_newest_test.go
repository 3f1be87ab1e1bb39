package policy

import (
	"testing"
	"time"
)

// Newest reads the last sample added, also once the ring has wrapped, and
// nothing from the zero or a forgotten series.
func TestPodSeriesNewestIsTheLastSampleAdded(t *testing.T) {
	h := NewHistory(time.Hour, 3)
	key := []byte("ns/p")
	if _, ok := (PodSeries{}).Newest(); ok {
		t.Error("the zero PodSeries has a newest sample")
	}
	for i := range 7 { // more than the 3 kept: the ring wraps
		h.AddPod(key, smp(60-i*10, int64(100+i), int64(1000+i)))
		got, ok := h.FindPod(key).Newest()
		if want := smp(60-i*10, int64(100+i), int64(1000+i)); !ok || got != want {
			t.Fatalf("after %d samples: %v %v, want %v", i+1, got, ok, want)
		}
	}
	ps := h.FindPod(key)
	h.DeletePod(string(key))
	if s, ok := ps.Newest(); ok {
		t.Errorf("a forgotten series reads %v", s)
	}
}
