package config

import (
	"testing"
	"time"
)

// defaultDurations are the durations of a command line that sets none.
var defaultDurations = Durations{
	HousekeepingInterval:      10 * time.Second,
	MaxObservationAge:         20 * time.Second,
	StuckAfter:                30 * time.Second,
	DiskStatsMaxAge:           9 * time.Second,
	RuntimeRetry:              10 * time.Second,
	RuntimeRetryMax:           time.Minute,
	RuntimeRequestTimeout:     5 * time.Second,
	VolumeStatsAggPeriod:      10 * time.Second,
	MinimumImageTTL:           2 * time.Minute,
	PressureTransitionPeriod:  5 * time.Minute,
	NodeStatusUpdateFrequency: 10 * time.Second,
	NodeStatusReportFrequency: 5 * time.Minute,
	LeaseDuration:             2 * time.Minute,
	FastPollInterval:          250 * time.Millisecond,
	TimeToExhaustionMargin:    500 * time.Millisecond,
	LocalKillAfter:            5 * time.Second,
	HardEvictionStopWait:      time.Second,
	CleanupTimeout:            30 * time.Second,
}

// TestDurations checks every duration the agent runs with, as given by a
// flag or a file and as derived from them.
func TestDurations(t *testing.T) {
	with := func(change func(*Durations)) Durations {
		d := defaultDurations
		change(&d)
		return d
	}
	tests := []struct {
		name string
		args []string
		want Durations
	}{
		{"defaults", nil, defaultDurations},
		{"housekeeping-interval scales what derives from it", []string{"--housekeeping-interval=2s"}, with(func(d *Durations) {
			d.HousekeepingInterval = 2 * time.Second
			d.MaxObservationAge = 4 * time.Second
			d.StuckAfter = 6 * time.Second
			d.DiskStatsMaxAge = 1800 * time.Millisecond
			d.RuntimeRetry = 2 * time.Second
		})},
		{"disk stats age rounds down to the nanosecond", []string{"--housekeeping-interval=15ns"}, with(func(d *Durations) {
			d.HousekeepingInterval = 15
			d.MaxObservationAge = 30
			d.StuckAfter = 45
			d.DiskStatsMaxAge = 13 // 135/10
			d.RuntimeRetry = 15
		})},
		{"runtime retry cap grows with a long interval", []string{"--housekeeping-interval=5m"}, with(func(d *Durations) {
			d.HousekeepingInterval = 5 * time.Minute
			d.MaxObservationAge = 10 * time.Minute
			d.StuckAfter = 15 * time.Minute
			d.DiskStatsMaxAge = 270 * time.Second
			d.RuntimeRetry = 5 * time.Minute
			d.RuntimeRetryMax = 5 * time.Minute
		})},
		{"volume-stats-agg-period zero means the default", []string{"--volume-stats-agg-period=0"}, defaultDurations},
		{"volume-stats-agg-period", []string{"--volume-stats-agg-period=1m"}, with(func(d *Durations) { d.VolumeStatsAggPeriod = time.Minute })},
		{"fast-poll-interval zero disables", []string{"--fast-poll-interval=0"}, with(func(d *Durations) { d.FastPollInterval = 0 })},
		{"local-kill-after zero disables", []string{"--local-kill-after=0"}, with(func(d *Durations) { d.LocalKillAfter = 0 })},
		{"eviction-pressure-transition-period zero", []string{"--eviction-pressure-transition-period=0"}, with(func(d *Durations) { d.PressureTransitionPeriod = 0 })},
		{"minimum-image-ttl-duration zero", []string{"--minimum-image-ttl-duration=0"}, with(func(d *Durations) { d.MinimumImageTTL = 0 })},
		{"runtime-request-timeout", []string{"--runtime-request-timeout=1m"}, with(func(d *Durations) { d.RuntimeRequestTimeout = time.Minute })},
		{"from --config", []string{"--config=" + kubeletGood}, with(func(d *Durations) {
			d.PressureTransitionPeriod = 3 * time.Minute
			d.MinimumImageTTL = 5 * time.Minute
			d.NodeStatusUpdateFrequency = 20 * time.Second
		})},
		{"a flag beats --config", []string{"--config=" + kubeletGood, "--node-status-update-frequency=1m"}, with(func(d *Durations) {
			d.PressureTransitionPeriod = 3 * time.Minute
			d.MinimumImageTTL = 5 * time.Minute
			d.NodeStatusUpdateFrequency = time.Minute
		})},
		{"node-status-report-frequency and lease-duration", []string{"--node-status-report-frequency=1m", "--lease-duration=20s"}, with(func(d *Durations) {
			d.NodeStatusReportFrequency = time.Minute
			d.LeaseDuration = 20 * time.Second
		})},
		{"report frequency equal to the update frequency", []string{"--node-status-report-frequency=10s"}, with(func(d *Durations) { d.NodeStatusReportFrequency = 10 * time.Second })},
		{"from --node-config", []string{"--node-config=" + writeTemp(t, "kubeletArguments:\n  node-status-update-frequency: [\"30s\"]\n")},
			with(func(d *Durations) { d.NodeStatusUpdateFrequency = 30 * time.Second })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Durations != tt.want {
				t.Errorf("got %+v, want %+v", c.Durations, tt.want)
			}
		})
	}
}

// TestDurationRejections gives each duration flag every kind of value it
// refuses, from the command line and from the files; the error names the
// flag (or the file's key) and the value.
func TestDurationRejections(t *testing.T) {
	negativeFrequency := "testdata/kubelet-negative-frequency.yaml"
	nodeConfig := writeTemp(t, "kubeletArguments:\n  node-status-update-frequency: [\"-5s\"]\n")
	tests := []struct {
		flag, value string
		args        []string // instead of --flag=value
		wantErr     string   // the whole error text
	}{
		{flag: "housekeeping-interval", value: "0s", wantErr: `--housekeeping-interval: invalid value "0s": must be positive`},
		{flag: "housekeeping-interval", value: "-10s", wantErr: `--housekeeping-interval: invalid value "-10s": must not be negative`},
		{flag: "node-status-update-frequency", value: "0s", wantErr: `--node-status-update-frequency: invalid value "0s": must be positive`},
		{flag: "node-status-update-frequency", value: "-1m", wantErr: `--node-status-update-frequency: invalid value "-1m0s": must not be negative`},
		{flag: "node-status-update-frequency", value: "-10s in --config", args: []string{"--config=" + negativeFrequency},
			wantErr: `nodeStatusUpdateFrequency in ` + negativeFrequency + `: invalid value "-10s": must not be negative`},
		{flag: "node-status-update-frequency", value: "-5s in --node-config", args: []string{"--node-config=" + nodeConfig},
			wantErr: `kubeletArguments.node-status-update-frequency in ` + nodeConfig + `: invalid value "-5s": must not be negative`},
		{flag: "node-status-report-frequency", value: "0s", wantErr: `--node-status-report-frequency: invalid value "0s": must be positive`},
		{flag: "node-status-report-frequency", value: "5s", wantErr: `--node-status-report-frequency: invalid value "5s": must not be below --node-status-update-frequency (10s)`},
		{flag: "lease-duration", value: "19s", wantErr: `--lease-duration: invalid value "19s": must be at least 20s`},
		{flag: "lease-namespace", value: "Kube_System", wantErr: `--lease-namespace: invalid value "Kube_System": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{flag: "runtime-request-timeout", value: "0s", wantErr: `--runtime-request-timeout: invalid value "0s": must be positive`},
		{flag: "runtime-request-timeout", value: "-1s", wantErr: `--runtime-request-timeout: invalid value "-1s": must not be negative`},
		{flag: "eviction-pressure-transition-period", value: "-1m", wantErr: `--eviction-pressure-transition-period: invalid value "-1m0s": must not be negative`},
		{flag: "minimum-image-ttl-duration", value: "-2m", wantErr: `--minimum-image-ttl-duration: invalid value "-2m0s": must not be negative`},
		{flag: "volume-stats-agg-period", value: "-1s", wantErr: `--volume-stats-agg-period: invalid value "-1s": must not be negative`},
		{flag: "fast-poll-interval", value: "-1s", wantErr: `--fast-poll-interval: invalid value "-1s": must not be negative`},
		{flag: "local-kill-after", value: "-1s", wantErr: `--local-kill-after: invalid value "-1s": must not be negative`},
		{flag: "eviction-time-to-exhaustion-margin", value: "-1ms", wantErr: `--eviction-time-to-exhaustion-margin: invalid value "-1ms": must not be negative`},
		{flag: "eviction-time-to-exhaustion-margin", value: "2m", wantErr: `--eviction-time-to-exhaustion-margin: invalid value "2m0s": must be at most 1m0s`},
	}
	for _, tt := range tests {
		t.Run(tt.flag+"="+tt.value, func(t *testing.T) {
			args := tt.args
			if args == nil {
				args = []string{"--" + tt.flag + "=" + tt.value}
			}
			_, err := complete(args...)
			if got := errText(err); got != tt.wantErr {
				t.Errorf("got error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

// TestDurationErrorsTogether: every invalid duration is reported at once,
// with the other settings' errors.
func TestDurationErrorsTogether(t *testing.T) {
	_, err := complete("--housekeeping-interval=0s", "--fast-poll-interval=-1s", "--local-kill-after=-2s", "--cgroup-driver=docker")
	want := `--housekeeping-interval: invalid value "0s": must be positive` + "\n" +
		`--fast-poll-interval: invalid value "-1s": must not be negative` + "\n" +
		`--local-kill-after: invalid value "-2s": must not be negative` + "\n" +
		`--cgroup-driver: invalid value "docker": must be "cgroupfs" or "systemd"`
	if got := errText(err); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
