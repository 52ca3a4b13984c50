package systemd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const socketFile = "evictd.socket"

// TestSocketUnitSettings checks the socket unit: one stream socket on
// evictd's default metrics address, passed to evictd.service (the unit of
// its name) rather than one service per connection, with the service's IP
// lists, which do not reach a passed socket.
func TestSocketUnitSettings(t *testing.T) {
	addr, _ := defaultMetricsAddr(t)
	u := unitSettings(t, socketFile)
	for _, tc := range []struct {
		section, key string
		want         []string
	}{
		{"Socket", "ListenStream", []string{addr}},
		{"Socket", "IPAddressDeny", unitSettings(t, unitFile)["Service"]["IPAddressDeny"]},
		{"Socket", "IPAddressAllow", unitSettings(t, unitFile)["Service"]["IPAddressAllow"]},
		{"Install", "WantedBy", []string{"sockets.target"}},
	} {
		if got := u[tc.section][tc.key]; !slices.Equal(got, tc.want) {
			t.Errorf("got %s=%q, want %q", tc.key, got, tc.want)
		}
	}
	for _, k := range []string{"ListenDatagram", "ListenSequentialPacket", "ListenFIFO", "Accept", "Service"} {
		if v, ok := u["Socket"][k]; ok {
			t.Errorf("got %s=%q, want it unset: evictd takes one stream socket, passed to evictd.service", k, v)
		}
	}
}

// TestSocketUnitVerifies runs systemd-analyze verify on the socket unit
// with the service it activates, and makes sure a mistake in it is caught.
func TestSocketUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	data, err := os.ReadFile(socketFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		bad         bool
	}{
		{"as shipped", "", false},
		{"with a mistake", "Backlog=lots\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			service := verifiable(t, "")
			socket := filepath.Join(filepath.Dir(service), socketFile)
			text := strings.Replace(string(data), "[Socket]\n", "[Socket]\n"+tc.extra, 1)
			if err := os.WriteFile(socket, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			problems := verify(t, analyze, socket, service)
			switch {
			case tc.bad && len(problems) == 0:
				t.Errorf("got no problems with %q added, want some", strings.TrimSpace(tc.extra))
			case !tc.bad && len(problems) > 0:
				t.Errorf("got problems, want none:\n%s", strings.Join(problems, "\n"))
			}
		})
	}
}
