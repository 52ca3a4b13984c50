package host

import (
	"fmt"
	"testing"

	"github.com/evictd/evictd/signals"
)

// FuzzPSI feeds arbitrary contents to the memory PSI file parser: it returns
// the six averages, each between 0 and 100% and read back the same from the
// kernel's own format, or an error naming the file.
func FuzzPSI(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parsePSI(fuzzFile, data)
		if err != nil {
			checkNamesFile(t, err)
			if got != nil {
				t.Fatalf("error %q with values %v", err, got)
			}
			return
		}
		if len(got) != 6 {
			t.Fatalf("got %d signals, want 6: %v", len(got), got)
		}
		kernel := func(v int64) string { return fmt.Sprintf("%d.%02d", v/100, v%100) }
		var text string
		for _, kind := range []string{"some", "full"} {
			sigs := psiSignals[kind]
			for _, sig := range sigs {
				v, ok := got[sig]
				if !ok {
					t.Fatalf("no %s in %v", sig, got)
				}
				if v < 0 || v > signals.StallScale {
					t.Fatalf("%s = %d, outside 0..%d", sig, v, signals.StallScale)
				}
			}
			text += fmt.Sprintf("%s avg10=%s avg60=%s avg300=%s total=0\n", kind, kernel(got[sigs[0]]), kernel(got[sigs[1]]), kernel(got[sigs[2]]))
		}
		again, err := parsePSI(fuzzFile, []byte(text))
		if err != nil {
			t.Fatalf("the values written back as the kernel writes them do not parse: %v\n%s", err, text)
		}
		for sig, v := range got {
			if again[sig] != v {
				t.Fatalf("%s: %d, written back and read again %d", sig, v, again[sig])
			}
		}
	})
}
