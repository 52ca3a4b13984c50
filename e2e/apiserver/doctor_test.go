package apiserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testcluster"
)

// doctorCheck is one check of `evictd doctor -o json`'s report.
type doctorCheck struct {
	Name, Status, Message, Fix string
}

// TestDoctorPermissions runs `evictd doctor` against a real
// kube-apiserver with RBAC and deploy/'s manifests: evictd's own
// identity (a node-bound token in a tokenFile, as the package installs
// it) is allowed every request the agent makes, token renewal included;
// an identity granted all of it but events is refused exactly the events
// (and its own token's renewal, a warning); a node name the API server
// does not know fails the node check.
func TestDoctorPermissions(t *testing.T) {
	const node = "doctor-node"
	c, admin, token := startNodeCluster(t, node)
	ctx := t.Context()
	dir := t.TempDir()
	args := func(kubeconfig string, extra ...string) []string {
		return append([]string{"--kubeconfig=" + kubeconfig, "--hostname-override=" + node, "--state-dir=" + filepath.Join(dir, "state"),
			"--container-runtime-endpoint=unix://" + filepath.Join(dir, "none.sock"), "--runtime-request-timeout=1s"}, extra...)
	}

	// evictd's identity: every permission.
	evictd := writeTokenKubeconfig(t, c, filepath.Join(dir, "evictd"), token)
	checks := runDoctor(t, args(evictd)...)
	if a := checks["API server"]; a.Status != "ok" || !strings.Contains(a.Message, "answers: Kubernetes v1.") {
		t.Errorf("API server: %+v, want ok with its version", a)
	}
	if n := checks["node"]; n.Status != "ok" || !strings.Contains(n.Message, "node "+node+" is registered") {
		t.Errorf("node: %+v, want ok", n)
	}
	perms := permissionChecks(checks)
	if len(perms) != 16 {
		t.Errorf("%d permissions checked, want the agent's 16 (impersonation and token renewal included): %v", len(perms), perms)
	}
	for _, p := range perms {
		if p.Status != "ok" {
			t.Errorf("evictd's identity: %+v, want ok", p)
		}
	}
	if _, ok := checks["permission create serviceaccounts/token evictd in kube-system"]; !ok {
		t.Errorf("the node-bound token's renewal is not checked: %v", perms)
	}

	// An identity without events.
	partial := partialIdentity(ctx, t, c, admin, node)
	checks = runDoctor(t, args(writeTokenKubeconfig(t, c, filepath.Join(dir, "partial"), partial))...)
	for _, p := range permissionChecks(checks) {
		want := "ok"
		switch p.Name {
		case "permission create events", "permission patch events":
			want = "fail"
		case "permission create serviceaccounts/token evictd-doctor-partial in kube-system":
			want = "warn"
		}
		if p.Status != want {
			t.Errorf("the identity without events: %+v, want %s", p, want)
		}
		if want != "ok" && (!strings.Contains(p.Message, "denied") || p.Fix == "") {
			t.Errorf("%s: %+v, want the denial and what to apply", p.Name, p)
		}
	}

	// A node the API server does not know.
	checks = runDoctor(t, args(evictd, "--hostname-override=no-such-node")...)
	if n := checks["node"]; n.Status != "fail" || !strings.Contains(n.Message, "node no-such-node is not registered") || !strings.Contains(n.Fix, "--hostname-override") {
		t.Errorf("an unknown node: %+v, want a failure naming it", n)
	}
}

// runDoctor runs the binary's doctor with args; the missing runtime
// socket always fails it, so the exit code is 1.
func runDoctor(t *testing.T, args ...string) map[string]doctorCheck {
	t.Helper()
	out, errOut, code := testagent.Run(t, append([]string{"doctor", "-o", "json"}, args...)...)
	var r struct {
		Checks []doctorCheck
		Failed int
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 {
		t.Fatalf("doctor: exit %d (want 1), report %v\n%s\n%s", code, err, out, errOut)
	}
	byName := map[string]doctorCheck{}
	for _, c := range r.Checks {
		byName[c.Name] = c
	}
	return byName
}

func permissionChecks(checks map[string]doctorCheck) []doctorCheck {
	var out []doctorCheck
	for name, c := range checks {
		if strings.HasPrefix(name, "permission ") {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b doctorCheck) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// partialIdentity makes the ServiceAccount kube-system/evictd-doctor-partial,
// granted the rules of deploy/rbac.yaml's ClusterRole evictd but those on
// events, and its Lease Role, and returns a token of it bound to node once
// RBAC enforces the grant.
func partialIdentity(ctx context.Context, t *testing.T, c *testcluster.Cluster, admin kubernetes.Interface, node string) string {
	t.Helper()
	const name = "evictd-doctor-partial"
	role, err := admin.RbacV1().ClusterRoles().Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("deploy/rbac.yaml's ClusterRole: %v", err)
	}
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, "events") {
			rules = append(rules, r)
		}
	}
	if len(rules) != len(role.Rules)-1 {
		t.Fatalf("ClusterRole evictd has %d rules on events, want 1", len(role.Rules)-len(rules))
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "kube-system"}}
	for _, create := range []func() error{
		func() error {
			_, err := admin.CoreV1().ServiceAccounts("kube-system").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, Subjects: subject}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "evictd-lease"}, Subjects: subject}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatalf("create the partial identity: %v", err)
		}
	}
	token, err := testcluster.NodeBoundToken(ctx, admin, "kube-system", name, node)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, client, authorizationv1.ResourceAttributes{Verb: "impersonate-on:associated-node:create", Resource: "pods", Subresource: "eviction"})
	waitAllowed(t, client, authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "evictd-" + node})
	return token
}
