package config

import (
	"errors"
	"maps"
	"sort"
	"strings"
	"testing"
)

// TestPairMapParse sets each value once on a fresh map flag: the kubelet's
// syntax, with errors that quote the entry at fault.
func TestPairMapParse(t *testing.T) {
	tests := []struct {
		name, in, sep, want string
		wantMap             map[string]string
		wantErr             string
	}{
		{name: "langle pairs", in: "memory.available<1Gi,nodefs.available<10%", sep: "<", want: "signal<quantity",
			wantMap: map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}},
		{name: "spaces and empty entries", in: " memory.available < 1Gi ,,nodefs.available<10%,", sep: "<", want: "signal<quantity",
			wantMap: map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}},
		// The kubelet skips an empty entry but not a blank one: it trims
		// only the name and the value.
		{name: "blank entry", in: "memory.available<1Gi, ,nodefs.available<10%", sep: "<", want: "signal<quantity",
			wantErr: `malformed pair " ": want signal<quantity ("<" is the only separator)`},
		{name: "blank entry, equals", in: "memory=1Gi, ", sep: "=", want: "resource=quantity",
			wantErr: `malformed pair " ": want resource=quantity`},
		{name: "empty value gives empty map", in: "", sep: "<", want: "signal<quantity", wantMap: map[string]string{}},
		{name: "repeated key keeps the last", in: "memory.available<1Gi,memory.available<2Gi", sep: "<", want: "signal<quantity",
			wantMap: map[string]string{"memory.available": "2Gi"}},
		{name: "equals pairs", in: "memory.available=1m30s", sep: "=", want: "signal=duration",
			wantMap: map[string]string{"memory.available": "1m30s"}},
		{name: "value may hold the separator", in: "a=b=c", sep: "=", want: "k=v",
			wantMap: map[string]string{"a": "b=c"}},
		{name: "equals where langle is wanted", in: "memory.available=1Gi", sep: "<", want: "signal<quantity",
			wantErr: `malformed pair "memory.available=1Gi": want signal<quantity ("<" is the only separator)`},
		// ">" is split here and kept on the value; thresholds.Parse accepts
		// it for the memory.pressure.* stall signals only.
		{name: "greater-than keeps its operator", in: "memory.pressure.full.avg10 > 20, memory.available>1Gi", sep: "<", want: "signal<quantity",
			wantMap: map[string]string{"memory.pressure.full.avg10": ">20", "memory.available": ">1Gi"}},
		{name: "greater-than where equals is wanted", in: "memory.pressure.full.avg10>20", sep: "=", want: "signal=duration",
			wantErr: `malformed pair "memory.pressure.full.avg10>20": want signal=duration`},
		{name: "langle where equals is wanted", in: "memory.available<1m", sep: "=", want: "signal=duration",
			wantErr: `malformed pair "memory.available<1m": want signal=duration`},
		{name: "no key", in: "<1Gi", sep: "<", want: "signal<quantity",
			wantErr: `malformed pair "<1Gi": empty name before "<", want signal<quantity`},
		{name: "no value", in: "memory.available<", sep: "<", want: "signal<quantity",
			wantErr: `malformed pair "memory.available<": empty value after "<", want signal<quantity`},
		{name: "no stall value", in: "memory.pressure.full.avg10 >", sep: "<", want: "signal<quantity",
			wantErr: `malformed pair "memory.pressure.full.avg10 >": empty value after "<", want signal<quantity`},
		{name: "greater-than is a value where equals is the separator", in: "a=>", sep: "=", want: "k=v",
			wantMap: map[string]string{"a": ">"}},
		{name: "bare word", in: "memory", sep: "=", want: "resource=quantity",
			wantErr: `malformed pair "memory": want resource=quantity`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{"default": "1"}
			err := newPairMap(&got, tt.sep, tt.want).Set(tt.in)
			if errText(err) != tt.wantErr {
				t.Fatalf("got error %q, want %q", errText(err), tt.wantErr)
			}
			if tt.wantErr == "" && !maps.Equal(got, tt.wantMap) {
				t.Errorf("got %v, want %v", got, tt.wantMap)
			}
		})
	}
}

func TestPairMapSet(t *testing.T) {
	m := map[string]string{"default.signal": "1"}
	v := newPairMap(&m, "<", "signal<quantity")
	if got, want := v.String(), "default.signal<1"; got != want {
		t.Fatalf("String before Set: got %q, want %q", got, want)
	}
	if err := v.Set("nodefs.available<10%"); err != nil {
		t.Fatal(err)
	}
	if err := v.Set("memory.available<1Gi"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}
	if !maps.Equal(m, want) {
		t.Errorf("after two Sets: got %v, want %v (the first Set replaces the default, the second adds)", m, want)
	}
	if got, want := v.String(), "memory.available<1Gi,nodefs.available<10%"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
	if err := v.Set("bad"); err == nil {
		t.Error("Set(bad): got no error, want one")
	}
	if got, want := v.Type(), "mapStringString"; got != want {
		t.Errorf("Type: got %q, want %q", got, want)
	}
	// A stall threshold is written back with its ">", and read back the same.
	if err := v.Set("memory.pressure.full.avg10>20"); err != nil {
		t.Fatal(err)
	}
	s := v.String()
	if want := "memory.available<1Gi,memory.pressure.full.avg10>20,nodefs.available<10%"; s != want {
		t.Errorf("String with a stall threshold: got %q, want %q", s, want)
	}
	var again map[string]string
	if err := newPairMap(&again, "<", "signal<quantity").Set(s); err != nil || !maps.Equal(again, m) {
		t.Errorf("String read back: got %v, %v, want %v", again, err, m)
	}
	var zero pairMap
	if got := zero.String(); got != "" {
		t.Errorf("String of the zero value: got %q, want \"\"", got)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var errTest = errors.New("test error")

func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
