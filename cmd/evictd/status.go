package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/server"
)

const statusHelp = `Usage: evictd status [-o text|json] [--metrics-bind-address ADDR]
                     [--metrics-ca-file FILE | --tls] [--metrics-bearer-token-file FILE]

Ask a running agent for its last pass (its /status endpoint) and print it:
each signal's available amount and capacity against its thresholds as the
agent enforces them (bytes in Ki, Mi, Gi; inodes and PIDs as counts; memory
stall as a percentage of time), the pressure conditions, the last decision
and its result, and the evictions in the last hour. -o json prints the
agent's JSON as it is.
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
	tokenFile := fs.String("metrics-bearer-token-file", "", "Path of the file holding the agent's bearer token (its --metrics-bearer-token-file); mode 0600 or stricter, owned by root or the caller. (default none)")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return usageError(stderr, "evictd status", err)
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
	var token []byte
	if *tokenFile != "" {
		// The same refusal as the agent's: a token others can read is
		// no longer a secret.
		if token, err = server.ReadToken("--metrics-bearer-token-file", *tokenFile); err != nil {
			fmt.Fprintf(stderr, "evictd status: %v\n", err)
			return 2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	url := scheme + "://" + *addr + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	if token != nil {
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: is the agent running? %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: read %s: %v\n", url, err)
		return 1
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (give the agent's token with --metrics-bearer-token-file)"
		}
		fmt.Fprintf(stderr, "evictd status: %s answered %s: %s%s\n", url, resp.Status, bytes.TrimSpace(body), hint)
		return 1
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
		return http.DefaultClient, "http", nil
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
