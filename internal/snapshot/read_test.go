package snapshot

import (
	"io"
	"math"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

// TestReadSaturatesSums: containers whose requests or usage add up past the
// largest int64 give the pod the largest int64, never a negative figure.
// FuzzSnapshot found the memory request wrapping to -6917529027641081856.
func TestReadSaturatesSums(t *testing.T) {
	sc, err := Read(strings.NewReader(`{
	  "observations": {"memory.available": {"available": "1Gi", "capacity": "1Gi"}},
	  "pods": [{"name": "a", "containers": [
	    {"name": "c1", "requests": {"memory": "5Ei", "ephemeral-storage": "6Ei"}, "limits": {"ephemeral-storage": "7Ei"}, "usage": {"memory": "7Ei"}},
	    {"name": "c2", "requests": {"memory": "5Ei", "ephemeral-storage": "6Ei"}, "limits": {"ephemeral-storage": "7Ei"}, "usage": {"memory": "7Ei"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := sc.Steps[0].Pods[0]
	for _, c := range []struct {
		name string
		got  int64
	}{
		{"memory request", p.MemoryRequest},
		{"ephemeral-storage request", p.EphemeralStorageRequest},
		{"ephemeral-storage limit", p.EphemeralStorageLimit},
		{"memory working set", *sc.Steps[0].Stats[p.UID].MemoryWorkingSet},
	} {
		if c.got != math.MaxInt64 {
			t.Errorf("%s: got %d, want %d", c.name, c.got, int64(math.MaxInt64))
		}
	}
}

// TestReadBadValues: every bad value is an error naming the field and the
// value, the same error on every reading.
func TestReadBadValues(t *testing.T) {
	obs := func(o string) string { return `{"observations": {` + o + `}}` }
	record := func(r string) string {
		return `{"apiVersion": "evictd.io/v1alpha1", "kind": "FlightRecord", "steps": [{"at": "0s", "observations": {}}], "record": {"start": "2026-01-01T00:00:00Z", ` + r + `}}`
	}
	tests := []struct{ name, in, want string }{
		{"NaN quantity", obs(`"memory.available": {"available": "NaN", "capacity": "1Gi"}`), `quantity "NaN"`},
		{"NaN number", obs(`"memory.available": {"available": NaN, "capacity": "1Gi"}`), "invalid character 'N'"},
		{"infinite number", obs(`"memory.available": {"available": 1, "capacity": 1e400}`), "quantity 1e400 is neither a string nor a number"},
		{"negative", obs(`"memory.available": {"available": -1, "capacity": "1Gi"}`), `quantity "-1" is negative`},
		{"above int64", obs(`"memory.available": {"available": 1, "capacity": "100000000000000000000000"}`), `quantity "100000000000000000000000" is too large`},
		{"largest int64", obs(`"memory.available": {"available": 1, "capacity": 9223372036854775807}`), `quantity "9223372036854775807" is too large`},
		{"exponent that never finishes parsing", obs(`"memory.available": {"available": "1e2147483647", "capacity": "1Gi"}`), `quantity "1e2147483647": exponent out of range`},
		{"zero capacity", obs(`"memory.available": {"available": 0, "capacity": 0}`), `steps[0].observations["memory.available"]: memory.available: capacity 0 is not positive`},
		{"available above capacity", obs(`"memory.available": {"available": 2, "capacity": 1}`), "available 2 is more than capacity 1"},
		{"stall above 100", obs(`"memory.pressure.full.avg10": {"stall": "100.01"}`), "stall \"100.01\": want a percentage"},
		{"negative stall", obs(`"memory.pressure.full.avg10": {"stall": -1}`), "stall -1: want a percentage"},
		{"negative age", obs(`"memory.available": {"available": 1, "capacity": 2, "age": "-1s"}`), `steps[0].observations["memory.available"].age: "-1s" is negative`},
		{"two bad observations: the first in sorted order", obs(`"nodefs.available": {"available": 1}, "memory.available": {"available": 1}`),
			`steps[0].observations["memory.available"]: available and capacity are both required`},
		{"two unknown resources: the first in sorted order", `{"pods": [{"name": "a", "requests": {"tpu": "1", "gpu": "1"}}]}`,
			`steps[0].pods[0].requests: unknown resource "gpu"`},
		{"local on a quantity signal", obs(`"memory.available": {"available": 1, "capacity": 2, "local": true}`),
			`steps[0].observations["memory.available"]: local is for the memory.pressure.* signals only`},
		{"local not a boolean", obs(`"memory.pressure.some.avg10": {"stall": 9, "local": "yes"}`), "cannot unmarshal string"},
		{"truncated", `{"observations": {"memory.available": {"avail`, "unexpected EOF"},
		{"not UTF-8", "{\"pods\": [{\"name\": \"a\", \"qos\": \"\xfe\"}]}", "steps[0].pods[0].qos: \"\ufffd\" is not Guaranteed"},
		{"name not UTF-8", "{\"pods\": [{\"name\": \"\xff\"}]}", "steps[0].pods[0].name \"\ufffd\": a lowercase RFC 1123 subdomain"},
		{"name with an escape", "{\"pods\": [{\"name\": \"web\\u001b[2J\"}]}", "steps[0].pods[0].name \"web\\x1b[2J\": a lowercase RFC 1123 subdomain"},
		{"namespace", "{\"pods\": [{\"namespace\": \"Team A\", \"name\": \"web\"}]}", "steps[0].pods[0].namespace \"Team A\": a lowercase RFC 1123 label"},
		{"uid with a newline", "{\"pods\": [{\"name\": \"web\", \"uid\": \"u\\n1\"}]}", "steps[0].pods[0].uid \"u\\n1\": want at most 128 printable characters"},
		{"container name", "{\"pods\": [{\"name\": \"web\", \"containers\": [{\"name\": \"App\"}]}]}", "steps[0].pods[0].containers[0].name \"App\": a lowercase RFC 1123 label"},
		{"volume name", "{\"pods\": [{\"name\": \"web\", \"localVolumes\": [\"../x\"]}]}", "steps[0].pods[0].localVolumes[0] \"../x\": a lowercase RFC 1123 label"},
		{"record read of another signal", record(`"reads": [{"at": "1s", "signal": "nodefs.available", "available": 1, "capacity": 2}]`),
			`record.reads[0].signal "nodefs.available": want memory.available or allocatableMemory.available`},
		{"record read without capacity", record(`"reads": [{"at": "1s", "signal": "memory.available", "available": 1}]`),
			`record.reads[0]: want available and capacity, neither negative`},
		{"record read at no time", record(`"reads": [{"at": "soon", "signal": "memory.available", "available": 1, "capacity": 2}]`),
			`record.reads[0].at: time: invalid duration "soon"`},
		{"record release", record(`"decision": {"at": "0s", "outcome": "evict", "reason": "r", "predicted": {"available": 1, "ratePerSecond": 1, "timeLeft": "1s", "release": "-1s", "margin": "0s", "readings": 5}}`),
			`record.decision.predicted.release: "-1s" is negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first string
			for range 10 {
				sc, err := Read(strings.NewReader(tt.in))
				if err == nil {
					t.Fatalf("got %+v, want an error containing %q", sc, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got error %q, want it to contain %q", err, tt.want)
				}
				if first != "" && err.Error() != first {
					t.Fatalf("the same snapshot read twice: %q, then %q", first, err)
				}
				first = err.Error()
			}
		})
	}
}

// TestReadLocalStall: a stall observation may say it is local; absent, it
// is the node's, as in the snapshots written before the field.
func TestReadLocalStall(t *testing.T) {
	sc, err := Read(strings.NewReader(`{"observations": {
	  "memory.pressure.some.avg10": {"stall": 38, "local": true},
	  "memory.pressure.full.avg10": {"stall": 12.5},
	  "memory.pressure.some.avg60": {"stall": 4, "local": false}}}`))
	if err != nil {
		t.Fatal(err)
	}
	obs := sc.Steps[0].Observations
	for sig, want := range map[string]bool{"memory.pressure.some.avg10": true, "memory.pressure.full.avg10": false, "memory.pressure.some.avg60": false} {
		if got := obs[signals.Signal(sig)].Local; got != want {
			t.Errorf("%s: local %v, want %v", sig, got, want)
		}
	}
}

// endless reads as many bytes b as asked for, for ever.
type endless byte

func (b endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestReadOverCap checks that a snapshot past the size cap gets an error
// that says so, not the JSON decoder's "unexpected EOF" at the cut, and
// that no more than the cap is read.
func TestReadOverCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"a string that never ends", io.MultiReader(strings.NewReader(`{"args": ["`), endless('a'))},
		{"white space", endless(' ')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted := &countingReader{r: tc.r}
			_, err := Read(counted)
			if want := "larger than 64 MiB, the most a snapshot may be"; err == nil || err.Error() != want {
				t.Errorf("got %v, want %q", err, want)
			}
			if counted.n > maxSize+1<<20 {
				t.Errorf("read %d bytes, want at most the cap (%d) and a buffer", counted.n, maxSize)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
