package main

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"default/web", "default/web"},
		{"usage−request 200.0Mi — skipped: critical pod (static)", "usage−request 200.0Mi — skipped: critical pod (static)"},
		{"web\x1b[2J", `web\x1b[2J`},
		{"a\nb\tc", `a\nb\tc`},
		{"bidi\u202ecba", `bidi\u202ecba`},
	} {
		if got := printable(tc.in); got != tc.want {
			t.Errorf("printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
