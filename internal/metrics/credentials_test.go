package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestCredentialExpiries checks that the source is asked at each scrape,
// that a zero time has no series, that without a source there is none, and
// that HELP names every credential.
func TestCredentialExpiries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	if got := testutil.CollectAndCount(m.expiry); got != 0 {
		t.Fatalf("without a source: got %d series, want 0", got)
	}
	token := time.Date(2026, 12, 25, 16, 0, 0, 0, time.UTC)
	calls := 0
	m.SetCredentialExpiries(func() map[Credential]time.Time {
		calls++
		return map[Credential]time.Time{CredentialToken: token.Add(time.Duration(calls) * time.Hour), CredentialClientCert: {}}
	})
	for scrape := 1; scrape <= 2; scrape++ {
		// A rotated token shows at the next scrape.
		mf := gatherOne(t, reg, "evictd_credential_expiry_timestamp_seconds")
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("scrape %d: got %d series, want the token's only", scrape, len(mf.GetMetric()))
		}
		s := mf.GetMetric()[0]
		if l := s.GetLabel(); len(l) != 1 || l[0].GetName() != "credential" || l[0].GetValue() != string(CredentialToken) {
			t.Errorf("scrape %d: got labels %v, want credential=token", scrape, l)
		}
		if got, want := s.GetGauge().GetValue(), float64(token.Add(time.Duration(scrape)*time.Hour).Unix()); got != want {
			t.Errorf("scrape %d: got %v, want %v", scrape, got, want)
		}
		for _, c := range credentials {
			if !mentions(mf.GetHelp(), string(c.v)) {
				t.Errorf("HELP does not name %s: %q", c.v, mf.GetHelp())
			}
		}
	}
	m.SetCredentialExpiries(nil)
	if got := testutil.CollectAndCount(m.expiry); got != 0 {
		t.Errorf("source removed: got %d series, want 0", got)
	}
	var nilMetrics *Metrics
	nilMetrics.SetCredentialExpiries(nil) // no panic
}

func gatherOne(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no %s gathered", name)
	return nil
}
