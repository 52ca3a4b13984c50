package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/pflag"
)

// status asks a running agent for its last pass and prints it as JSON.
func status(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("evictd status", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("metrics-bind-address", "127.0.0.1:9847", "Address the agent serves /metrics and /status on.")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	url := "http://" + *addr + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "evictd status: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
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
		fmt.Fprintf(stderr, "evictd status: %s answered %s: %s\n", url, resp.Status, bytes.TrimSpace(body))
		return 1
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		fmt.Fprintf(stderr, "evictd status: %s did not answer JSON: %v\n", url, err)
		return 1
	}
	out.WriteByte('\n')
	_, _ = out.WriteTo(stdout)
	return 0
}
