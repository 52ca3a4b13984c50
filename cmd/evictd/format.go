package main

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// Quantities and pressures as status and simulate print them.

// human prints an amount for a person: bytes with binary suffixes and two
// decimals, counts as they are.
func human(v int64, res signals.Resource) string {
	if res != signals.ResourceMemory && res != signals.ResourceEphemeralStorage {
		return fmt.Sprint(v)
	}
	const unit = 1024
	if v < unit && v > -unit {
		return fmt.Sprintf("%d", v)
	}
	f, suffix := float64(v), ""
	for _, s := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} {
		if f < unit && f > -unit {
			break
		}
		f /= unit
		suffix = s
	}
	q := resource.NewQuantity(v, resource.BinarySI)
	if q.String() == fmt.Sprintf("%.0f%s", f, suffix) {
		return q.String()
	}
	return fmt.Sprintf("%.2f%s", f, suffix)
}

// amount is v in the signal's unit: bytes in Ki, Mi, Gi…, inodes and PIDs
// as counts.
func amount(s signals.Signal, v int64) string {
	return human(v, s.Resource())
}

func pressures(p map[string]bool) string {
	var on []string
	for name, active := range p {
		if active {
			on = append(on, name)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	sort.Strings(on)
	return strings.Join(on, ", ")
}

// printable is s for a terminal: each rune that is not printable (control
// characters, escape sequences' ESC) as Go would escape it in a quoted
// string, without the quotes. What a snapshot names is checked when it is
// read, but a text line must not carry a terminal's commands whatever it
// quotes.
func printable(s string) string {
	if !strings.ContainsFunc(s, notPrintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if notPrintable(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// textf writes to w as fmt.Fprintf does, each argument of a string kind
// (signals.Signal, decide.Outcome…), error or fmt.Stringer made printable
// first; the format's own tabs and newlines stay. Every text line that
// quotes what the agent, a snapshot or the API server said is written
// with it: pod names, reasons and results are a tenant's or a server's
// words.
func textf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case error:
			args[i] = printable(v.Error())
		case fmt.Stringer:
			args[i] = printable(v.String())
		case []byte:
			args[i] = printable(string(v))
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				args[i] = printable(rv.String())
			}
		}
	}
	fmt.Fprintf(w, format, args...)
}
