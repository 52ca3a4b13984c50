package signals

import (
	"math"
	"testing"
)

func TestAddSat(t *testing.T) {
	tests := []struct {
		a, b, want int64
	}{
		{1, 2, 3},
		{-5, 3, -2},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64, math.MaxInt64, -1},
		{0, 0, 0},
	}
	for _, tt := range tests {
		if got := AddSat(tt.a, tt.b); got != tt.want {
			t.Errorf("AddSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
