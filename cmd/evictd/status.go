package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/server"
	"github.com/evictd/evictd/internal/snapshot"
	"github.com/evictd/evictd/signals"
)

const statusHelp = `Usage: evictd status [-o text|json] [--snapshot FILE] [--config FILE] [--metrics-bind-address ADDR]
                     [--metrics-ca-file FILE | --tls] [--metrics-bearer-token-file FILE] [--agent-user USER]

Ask a running agent for its last pass (its /status endpoint) and print it:
each signal's available amount and capacity against its thresholds as the
agent enforces them (bytes in Ki, Mi, Gi; inodes and PIDs as counts; memory
stall as a percentage of time), the pressure conditions, the last decision
and its result, and the evictions in the last hour. -o json prints the
agent's JSON as it is. --snapshot FILE writes the node as it is now as a
snapshot instead (its /snapshot endpoint), which 'evictd simulate' replays
at other thresholds: what they would do right now. Where the agent serves,
over TLS or not, and its token come from its configuration file
(/etc/evictd/config.yaml, where the packages install it, or --config)
unless given by flags.

The bearer token (--metrics-bearer-token-file) is sent only over TLS
verified with --metrics-ca-file (or with the system's CAs, --tls), or over
plain HTTP to a loopback address whose listening socket root, the caller or
--agent-user owns (/proc/net/tcp): a local user who took the agent's port
while it restarted gets a connection and no token, and status says who
holds the port.
`

// status asks a running agent for its last pass and prints it as a table,
// or as JSON with -o json.
func status(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("evictd status", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, statusHelp)
	output := fs.StringP("output", "o", "text", "Output format: text (a table) or json.")
	addr := fs.String("metrics-bind-address", "127.0.0.1:9847", "Address the agent serves /metrics and /status on.")
	caFile := fs.String("metrics-ca-file", "",
		"Path of the PEM CA certificate(s) that verify the agent's TLS certificate (its --metrics-tls-cert-file); implies --tls. "+
			"The address must be one the certificate names. (default none)")
	useTLS := fs.Bool("tls", false, "Speak TLS to the agent, verifying its certificate with the system's CAs unless --metrics-ca-file is given. (default false)")
	tokenFile := fs.String("metrics-bearer-token-file", "", "Path of the file holding the agent's bearer token (its --metrics-bearer-token-file); mode 0600 or stricter, owned by root or the caller. "+
		"It is sent over TLS verified with a CA, or over plain HTTP to a loopback address whose listening socket root, the caller or --agent-user owns; "+
		"anywhere else status refuses to send it. (default none)")
	snapFile := fs.String("snapshot", "", "Instead of the last pass, ask the agent for the node as it is now (the last pass's observations, its pods and every kind of their stats read now) and write it to this file as a snapshot for evictd simulate (docs/SNAPSHOT.md), mode 0600; - writes it to stdout. (default none)")
	agentUser := fs.String("agent-user", "", "The user evictd runs as when it is not root (a name or a uid; under DynamicUser=, the uid of its running process): "+
		"a token goes over plain HTTP to a loopback socket it owns too. (default none: root and the caller only)")
	cfgFile := fs.String("config", defaultConfigFile,
		"Path of the agent's configuration file (its --config): its metricsBindAddress, metricsTLSCertFile and metricsBearerTokenFile are used where "+
			"--metrics-bind-address, --tls and --metrics-bearer-token-file are not given; a missing file at the default path is skipped. An empty value reads none.")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return usageError(stderr, "evictd status", err)
	}
	if err := fromAgentConfig(fs, *cfgFile, addr, useTLS, tokenFile); err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "evictd status", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *output != "text" && *output != "json" {
		return usageError(stderr, "evictd status", fmt.Errorf("--output %q: want text or json", *output))
	}
	client, scheme, err := statusClient(*caFile, *useTLS)
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	trusted := []int{0, os.Geteuid()}
	if *agentUser != "" {
		uid, err := lookupUser(*agentUser)
		if err != nil {
			fmt.Fprintf(stderr, "evictd status: --agent-user: invalid value %q: %v\n", *agentUser, err)
			return 2
		}
		trusted = append(trusted, uid)
	}
	var token []byte
	if *tokenFile != "" {
		// The same refusal as the agent's: a token others can read is
		// no longer a secret.
		if token, err = server.ReadToken("--metrics-bearer-token-file", *tokenFile); err != nil {
			fmt.Fprintf(stderr, "evictd status: %v\n", err)
			return 2
		}
		if scheme == "http" {
			// Not authenticated by a certificate: by who owns the socket.
			client = &http.Client{Transport: guardedTransport(&peerCheck{procRoot: "/proc", trusted: trusted, wait: time.Second})}
		}
	}
	// The agent never redirects; a redirect is answered as an error, not
	// followed with the token.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	path, timeout := "/status", statusTimeout
	if *snapFile != "" {
		// The loop answers between two passes; one may be waiting for
		// an evicted pod to go.
		path, timeout = "/snapshot", snapshotTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	url := scheme + "://" + *addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	if token != nil {
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	resp, err := client.Do(req)
	if upe := (*untrustedPeerError)(nil); errors.As(err, &upe) {
		fmt.Fprintf(stderr, "evictd status: %v\n", upe)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: is the agent running? %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: read %s: %v\n", url, err)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (give the agent's token with --metrics-bearer-token-file)"
		}
		textf(stderr, "evictd status: %s answered %s: %s%s\n", url, resp.Status, bytes.TrimSpace(body), hint)
		return 1
	}
	if *snapFile != "" {
		return saveSnapshot(*snapFile, url, body, stdout, stderr)
	}
	if *output == "json" {
		var out bytes.Buffer
		if err := json.Indent(&out, bytes.TrimSpace(body), "", "  "); err != nil {
			fmt.Fprintf(stderr, "evictd status: %s did not answer JSON: %v\n", url, err)
			return 1
		}
		out.WriteByte('\n')
		// An older agent escaped the thresholds' < and > as \u003c, \u003e.
		_, _ = stdout.Write(unescapeHTML(out.Bytes()))
		return 0
	}
	var st manager.Status
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintf(stderr, "evictd status: %s did not answer a status: %v\n", url, err)
		return 1
	}
	if err := writeStatus(stdout, &st, time.Now()); err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 1
	}
	return 0
}

// statusClient returns the HTTP client and scheme for the agent: plain HTTP,
// or TLS verified with the CAs in caFile (or the system's). There is no way
// to skip verification: a token sent to an unverified server is given away.
func statusClient(caFile string, useTLS bool) (*http.Client, string, error) {
	if caFile == "" && !useTLS {
		return &http.Client{Transport: http.DefaultTransport}, "http", nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, "", fmt.Errorf("--metrics-ca-file: invalid value %q: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, "", fmt.Errorf("--metrics-ca-file: invalid value %q: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, "https", nil
}

// statusTimeout bounds how long `evictd status` waits for the agent.
const statusTimeout = 5 * time.Second

// snapshotTimeout bounds `status --snapshot`: the agent's own bound on
// the loop's answer (20 s), and the reading of every pod's stats.
const snapshotTimeout = 30 * time.Second

// saveSnapshot checks that body, the agent's /snapshot answer, is a
// snapshot simulate reads, and writes it to path (mode 0600) or stdout.
func saveSnapshot(path, url string, body []byte, stdout, stderr io.Writer) int {
	sc, err := snapshot.Read(bytes.NewReader(body))
	if err != nil {
		textf(stderr, "evictd status: %s did not answer a snapshot: %v\n", url, err)
		return 1
	}
	if path == "-" {
		_, _ = stdout.Write(body)
		return 0
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.Write(body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		textf(stderr, "evictd status: --snapshot: %v\n", err)
		return 1
	}
	textf(stdout, "wrote the node as it is now, %d pods, to %s; replay it with evictd simulate --snapshot %s\n", len(sc.Steps[0].Pods), path, path)
	return 0
}

// writeStatus prints an agent's last pass for a person: a line on the
// pass, a table of each signal against its thresholds, then pressure,
// decision, result and evictions. now dates the pass ("3s ago").
func writeStatus(w io.Writer, st *manager.Status, now time.Time) error {
	if st.Time.IsZero() {
		_, err := fmt.Fprintln(w, "no pass has completed yet: the agent is starting")
		return err
	}
	head := fmt.Sprintf("last pass %s (%s ago), trigger %s, %d pods", st.Time.UTC().Format(time.RFC3339), age(now.Sub(st.Time)), st.Trigger, st.Pods)
	if st.DryRun {
		head += ", dry run: nothing is acted on"
	}
	textf(w, "%s\n", head)
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tAVAILABLE\tCAPACITY\tTHRESHOLD\tKIND\tSTATE")
	for _, r := range statusRows(st) {
		textf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.signal, r.available, r.capacity, r.threshold, r.kind, r.state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	textf(tw, "pressure:\t%s\n", pressures(st.Pressures))
	dec := st.Decision
	textf(tw, "decision:\t%s: %s\n", dec.Outcome, dec.Reason)
	if dec.Pod != nil {
		kind := "soft"
		if dec.Hard {
			kind = "hard"
		}
		textf(tw, "\tevict %s for %s (%s, grace period %ds)\n", dec.Pod.Ref(), dec.Signal, kind, dec.GracePeriod)
	}
	for _, v := range dec.LocalStorage {
		ref := "?"
		if v.Pod != nil {
			ref = v.Pod.Ref()
		}
		textf(tw, "\tevict %s: %s %s used, limit %s\n", ref, v.Signal, human(v.Usage, signals.ResourceEphemeralStorage), human(v.Limit, signals.ResourceEphemeralStorage))
	}
	if st.Result != "" {
		textf(tw, "result:\t%s\n", st.Result)
	}
	textf(tw, "evictions:\t%s\n", evictions(st.Limits))
	for i, f := range st.InFlight {
		label := ""
		if i == 0 {
			label = "in flight:"
		}
		state := "terminating since " + f.DeletionTimestamp.UTC().Format(time.RFC3339) + ", holds back the next eviction until " + f.WaitUntil.UTC().Format(time.RFC3339)
		if f.Overdue {
			state = "terminating since " + f.DeletionTimestamp.UTC().Format(time.RFC3339) + ", overdue"
		}
		textf(tw, "%s\t%s %s\n", label, f.Pod, state)
	}
	return tw.Flush()
}

// statusRow is one line of the signal table.
type statusRow struct {
	signal, available, capacity, threshold, kind, state string
}

// statusRows has a line per threshold, in signal order, and one for each
// observed signal without a threshold; "-" where there is nothing.
func statusRows(st *manager.Status) []statusRow {
	obs := map[signals.Signal]manager.ObservationStatus{}
	for _, o := range st.Observations {
		obs[o.Signal] = o
	}
	ths := map[signals.Signal][]manager.ThresholdStatus{}
	var order []signals.Signal
	for _, s := range signals.All() {
		order = append(order, s)
	}
	known := map[signals.Signal]bool{}
	for _, s := range order {
		known[s] = true
	}
	for _, t := range st.Thresholds {
		s := thresholdSignal(t.Threshold)
		if !known[s] { // from a newer agent
			known[s] = true
			order = append(order, s)
		}
		ths[s] = append(ths[s], t)
	}
	for _, o := range st.Observations {
		if !known[o.Signal] {
			known[o.Signal] = true
			order = append(order, o.Signal)
		}
	}

	var rows []statusRow
	for _, s := range order {
		o, observed := obs[s]
		if !observed && len(ths[s]) == 0 {
			continue
		}
		avail, capacity := "-", "-"
		if observed {
			avail, capacity = amount(s, o.Available), amount(s, o.Capacity)
			if s.Stall() {
				avail, capacity = signals.FormatStall(o.Available)+" stalled", "-"
			}
		}
		if len(ths[s]) == 0 {
			rows = append(rows, statusRow{string(s), avail, capacity, "-", "-", "-"})
			continue
		}
		for _, t := range ths[s] {
			rows = append(rows, statusRow{string(s), avail, capacity, thresholdText(s, t), thresholdKind(t), thresholdState(t, st.Time)})
		}
	}
	return rows
}

// thresholdSignal is the signal a threshold as Format writes it is on:
// what comes before its operator.
func thresholdSignal(th string) signals.Signal {
	if i := strings.IndexAny(th, "<>"); i >= 0 {
		return signals.Signal(th[:i])
	}
	return signals.Signal(th)
}

// thresholdText is the operator and value as the agent enforces them, in
// the unit of the signal's AVAILABLE column: "<100Mi", "<1.50Gi", "<1000",
// ">20%" for a stall; a percentage of capacity as written, followed by
// what it comes to on this node: "<10% (25.20Gi)".
func thresholdText(s signals.Signal, t manager.ThresholdStatus) string {
	text := strings.TrimPrefix(t.Threshold, string(s))
	op, value := text[:min(1, len(text))], text[min(1, len(text)):]
	switch {
	case s.Stall():
	case strings.HasSuffix(value, "%"):
		if t.Quantity != nil {
			text += " (" + amount(s, *t.Quantity) + ")"
		}
	default:
		// The agent writes quantities in canonical form (1.5Gi as
		// 1536Mi, 1000 as 1k).
		if q, err := resource.ParseQuantity(value); err == nil {
			text = op + amount(s, q.Value())
		}
	}
	return text
}

// thresholdKind is hard, or soft with its grace period.
func thresholdKind(t manager.ThresholdStatus) string {
	if t.GracePeriod != "" {
		return t.Kind + ", grace " + t.GracePeriod
	}
	return t.Kind
}

func thresholdState(t manager.ThresholdStatus, at time.Time) string {
	switch {
	case !t.Observed:
		return "not observed"
	case t.Met && t.MetSince != nil:
		return "met for " + age(at.Sub(*t.MetSince))
	case t.Met:
		return "met"
	}
	return "not met"
}

// age is d to the second: 3s, 2m5s, 1h30m0s.
func age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

func evictions(l manager.LimitsStatus) string {
	s := fmt.Sprintf("%d in the last hour", l.EvictionsInLastHour)
	switch {
	case l.CapReached && l.NextEvictionAllowed != nil:
		s += fmt.Sprintf(", cap of %d reached: none until %s", l.MaxEvictionsPerHour, l.NextEvictionAllowed.UTC().Format(time.RFC3339))
	case l.MaxEvictionsPerHour > 0:
		s += fmt.Sprintf(" (cap %d)", l.MaxEvictionsPerHour)
	default:
		s += " (no cap)"
	}
	return s
}

// unescapeHTML turns encoding/json's \u003c, \u003e and \u0026 in the
// strings of valid JSON back into <, > and &, as an encoder with
// SetEscapeHTML(false) writes them; every other byte, and every other
// escape, stays as it is.
//
// Kept over json.Encoder.SetEscapeHTML(false), which the agent's /status now uses (internal/server): that only keeps an encoder from escaping, and re-encoding an older agent's body through any sorts its keys, so -o json would no longer print the agent's JSON byte for byte.
func unescapeHTML(data []byte) []byte {
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data):
			if data[i+1] == 'u' && i+6 <= len(data) {
				switch strings.ToLower(string(data[i+2 : i+6])) {
				case "003c":
					out, i = append(out, '<'), i+5
					continue
				case "003e":
					out, i = append(out, '>'), i+5
					continue
				case "0026":
					out, i = append(out, '&'), i+5
					continue
				}
			}
			// Any other escape, \\ and \" among them, is copied whole.
			out, i = append(out, c, data[i+1]), i+1
			continue
		}
		out = append(out, c)
	}
	return out
}

// defaultConfigFile is where the packages install the agent's
// configuration file, which the unit gives as its --config.
const defaultConfigFile = "/etc/evictd/config.yaml"

// fromAgentConfig sets status's flags that were not given from the agent's
// configuration file path, as the agent reads it (drop-ins aside): where
// it serves /status, whether over TLS, and the token it asks for. A
// missing file at defaultConfigFile is no error (a node without the
// package), nor is it read when the flags give all it would; any other
// file must read as the agent would start with it.
func fromAgentConfig(fs *pflag.FlagSet, path string, addr *string, useTLS *bool, tokenFile *string) error {
	given := fs.Changed("metrics-bind-address") && fs.Changed("metrics-bearer-token-file") && (fs.Changed("tls") || fs.Changed("metrics-ca-file"))
	if path == "" || given && !fs.Changed("config") {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !fs.Changed("config") {
		return nil
	}
	agent, opts := config.NewFlagSet("evictd")
	if err := agent.Parse([]string{"--config", path}); err != nil {
		return fmt.Errorf("--config %q: %w", path, err)
	}
	cfg, err := opts.Complete(agent)
	if err != nil {
		return fmt.Errorf("--config %q: %w", path, err)
	}
	if !fs.Changed("metrics-bind-address") {
		*addr = dialAddress(cfg.MetricsBindAddress)
	}
	if !fs.Changed("tls") && !fs.Changed("metrics-ca-file") && cfg.MetricsTLSCertFile != "" {
		*useTLS = true
	}
	if !fs.Changed("metrics-bearer-token-file") && cfg.MetricsBearerTokenFile != "" {
		*tokenFile = cfg.MetricsBearerTokenFile
	}
	return nil
}

// dialAddress is the address to reach a listener bound to bind: its own,
// or the loopback address when it binds every address (0.0.0.0:9847,
// [::]:9847, :9847).
func dialAddress(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return bind
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return bind
}
