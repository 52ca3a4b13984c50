package agent

import (
	"strings"
	"testing"
)

func TestInClusterServer(t *testing.T) {
	for _, tc := range []struct {
		name, host, port string
		want, wantErr    string
	}{
		{"IPv4", "10.96.0.1", "443", "https://10.96.0.1:443", ""},
		{"IPv6 in brackets", "fd00::1", "6443", "https://[fd00::1]:6443", ""},
		{"host name", "api.cluster.example", "443", "https://api.cluster.example:443", ""},
		{"neither", "", "", "", "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"},
		{"no host", "", "443", "", "KUBERNETES_SERVICE_HOST is not set"},
		{"no port", "10.96.0.1", "", "", "KUBERNETES_SERVICE_PORT is not set"},
		{"named port", "10.96.0.1", "https", "", `KUBERNETES_SERVICE_PORT "https" is not a port number`},
		{"port 0", "10.96.0.1", "0", "", `KUBERNETES_SERVICE_PORT "0" is not a port number`},
		{"port too big", "10.96.0.1", "70000", "", `KUBERNETES_SERVICE_PORT "70000"`},
		{"host with a path", "10.96.0.1/x", "443", "", `KUBERNETES_SERVICE_HOST "10.96.0.1/x" is not an IP address or host name`},
		{"host with a port", "10.96.0.1:443", "443", "", `KUBERNETES_SERVICE_HOST "10.96.0.1:443"`},
		{"host with a user", "evil@10.96.0.1", "443", "", `KUBERNETES_SERVICE_HOST "evil@10.96.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"KUBERNETES_SERVICE_HOST": tc.host, "KUBERNETES_SERVICE_PORT": tc.port}
			got, err := InClusterServer(func(k string) string { return env[k] })
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %q, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}
