package reclaimable

import "testing"

func TestEvaluateAppliesEveryOp(t *testing.T) {
	cases := []struct {
		name  string
		terms []Term
		want  int64
	}{
		{"terms start from zero", nil, 0},
		{"a base term replaces the running value and subtractions follow",
			[]Term{{Op: OpBase, Value: 100}, {Op: OpSubtract, Value: 30}, {Op: OpInfo, Value: 1000}}, 70},
		{"a floor raises a negative value",
			[]Term{{Op: OpBase, Value: 10}, {Op: OpSubtract, Value: 30}, {Op: OpFloor, Value: 0}}, 0},
		{"a cap lowers the value", []Term{{Op: OpBase, Value: 10}, {Op: OpCap, Value: 4}}, 4},
		{"a value below the minimum becomes zero", []Term{{Op: OpBase, Value: 10}, {Op: OpMinimum, Value: 11}}, 0},
		{"a value at the minimum stays", []Term{{Op: OpBase, Value: 10}, {Op: OpMinimum, Value: 10}}, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (ResourceExplanation{Terms: tc.terms}).Evaluate(); got != tc.want {
				t.Errorf("Evaluate = %d, want %d", got, tc.want)
			}
		})
	}
}
