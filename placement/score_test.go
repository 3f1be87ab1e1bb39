package placement

import "testing"

func TestScoreBounds(t *testing.T) {
	// Free room above the published value (published went up, or an
	// over-booked node recovering) and below zero stay within 0..10.
	tests := []struct {
		name    string
		st      State
		req     int64
		spread  int64
		binpack int64
	}{
		{"more free than published clamps to the maximum", State{Known: true, Fresh: true,
			Room: req(1000, gi), Free: req(5000, 5*gi)}, 100, 10, 0},
		{"nothing published for memory counts as no room there; halves round up", State{Known: true, Fresh: true,
			Room: req(1000, 0), Free: req(1000, 0)}, 500, 3, 7},
		{"no fit scores the minimum under both strategies", State{Known: true, Fresh: true,
			Room: req(1000, gi), Free: req(-200, gi)}, 100, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req(tt.req, 0)
			if got := Score(StrategySpread, tt.st, r, 10); got != tt.spread {
				t.Errorf("spread = %d, want %d", got, tt.spread)
			}
			if got := Score(StrategyBinpack, tt.st, r, 10); got != tt.binpack {
				t.Errorf("binpack = %d, want %d", got, tt.binpack)
			}
		})
	}
}
