package testagent

import "testing"

func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		err        bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":2}`, "a", false},
		{`{"a":{"b":1,"c":{"b":2}},"b":[{"x":1},{"x":2}]}`, "", false},
		{`{"a":{"b":1,"b":2}}`, "a.b", false},
		{`{"a":[{"x":1,"x":1}]}`, "a.x", false},
		{`{"a":1`, "", true},
		{`{"a":1}{"b":2}`, "", true},
	} {
		got, err := DuplicateKey([]byte(tc.line))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("DuplicateKey(%s): got %q, %v; want %q, error %v", tc.line, got, err, tc.want, tc.err)
		}
	}
}
