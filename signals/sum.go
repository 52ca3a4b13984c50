package signals

import "math"

// AddSat adds two quantities without wrapping around: a sum past the
// int64 range saturates at its bound. Usages, requests and limits read
// from tenants' pods and garbled kernel files can be absurd, and a sum that
// wrapped to a small or negative number would rank or trigger on nonsense.
func AddSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
