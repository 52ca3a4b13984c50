package podsource

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWatchFailedHints: the two refusals an operator causes by
// installing evictd (a cluster without constrained impersonation, a unit
// that allows loopback only) are logged with what to do; others without.
func TestWatchFailedHints(t *testing.T) {
	eperm := &url.Error{Op: "Get", URL: "https://192.0.2.10:6443/api/v1/pods", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: os.NewSyscallError("connect", syscall.EPERM)}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes", Group: "authentication.k8s.io"}, "node-a",
		fmt.Errorf(`User "system:serviceaccount:kube-system:evictd" cannot impersonate:associated-node resource "nodes"`))
	tests := []struct {
		name string
		err  error
		hint string // "" for none
	}{
		{"impersonation refused", fmt.Errorf("failed to list *v1.Pod: %w", forbidden), "--impersonate-node"},
		{"connect not permitted", fmt.Errorf("failed to list *v1.Pod: %w", eperm), "api-server.conf"},
		{"connection refused", fmt.Errorf("failed to list *v1.Pod: %w", os.NewSyscallError("connect", syscall.ECONNREFUSED)), ""},
		{"other refusal", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("RBAC")), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &Source{log: slog.New(slog.NewTextHandler(&buf, nil)), watchErr: map[string]string{}}
			s.watchFailed("pods", tc.err)
			got := buf.String()
			if tc.hint == "" && strings.Contains(got, "hint=") {
				t.Errorf("logged a hint for %v: %s", tc.err, got)
			}
			if tc.hint != "" && !strings.Contains(got, "hint=") || !strings.Contains(got, tc.hint) {
				t.Errorf("log %q: want a hint naming %q", got, tc.hint)
			}
		})
	}
}
