package thresholds

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds on the text of a quantity, checked before resource.ParseQuantity
// sees it: with an exponent of a million, parsing or comparing the
// quantity takes seconds, and with 1e2147483647 it does not finish (the
// decimal is expanded in full). No setting needs more.
const (
	maxQuantityLen      = 64
	maxQuantityExponent = 999
)

// ParseQuantity is resource.ParseQuantity for settings evictd reads, with
// the text bounded first: at most 64 characters and a decimal exponent
// ("1e6") of at most ±999. Within them the result and errors are
// resource.ParseQuantity's. Like those, the errors do not repeat s: the
// caller names the value.
func ParseQuantity(s string) (resource.Quantity, error) {
	if len(s) > maxQuantityLen {
		return resource.Quantity{}, fmt.Errorf("longer than %d characters", maxQuantityLen)
	}
	num := strings.TrimLeft(s, "+-")
	suffix := strings.TrimLeft(num, "0123456789.")
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		exp := strings.TrimLeft(strings.TrimLeft(suffix[1:], "+-"), "0")
		if len(exp) > 3 && strings.Trim(exp, "0123456789") == "" {
			return resource.Quantity{}, fmt.Errorf("exponent out of range (at most ±%d)", maxQuantityExponent)
		}
	}
	return resource.ParseQuantity(s)
}
