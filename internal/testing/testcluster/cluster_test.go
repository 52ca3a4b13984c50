package testcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// maxReady is how long a start with cached binaries may take.
const maxReady = 30 * time.Second

func TestCluster(t *testing.T) {
	for _, tc := range []struct {
		name              string
		controllerManager bool
	}{
		{"apiserver", false},
		{"with-controller-manager", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir())
			c := StartForTest(t, Options{
				Tokens:            map[string][]string{"alice": {"team-a", "team-b"}},
				ControllerManager: tc.controllerManager,
			})
			if got := c.ReadyIn(); got > maxReady {
				t.Errorf("ready in %s, want under %s", got, maxReady)
			}
			ctx := t.Context()
			admin := kubernetes.NewForConfigOrDie(c.AdminConfig())

			wantNames := []string{"etcd", "kube-apiserver"}
			if tc.controllerManager {
				wantNames = append(wantNames, "kube-controller-manager")
			}
			pids := c.PIDs()
			if got := sortedKeys(pids); !slices.Equal(got, wantNames) {
				t.Fatalf("running components %v, want %v", got, wantNames)
			}
			for name, pid := range pids {
				if !alive(pid) {
					t.Errorf("%s (pid %d) not running", name, pid)
				}
			}

			createObjects(t, ctx, admin, tc.controllerManager)
			listObjects(t, ctx, admin)
			checkIdentities(t, ctx, c)
			if tc.controllerManager {
				checkDisruptionController(t, ctx, admin)
			}
			checkKubeconfig(t, ctx, c)

			oldAPIServer := pids["kube-apiserver"]
			if err := c.StopAPIServer(); err != nil {
				t.Fatalf("StopAPIServer: %v", err)
			}
			if alive(oldAPIServer) {
				t.Errorf("kube-apiserver (pid %d) still running after StopAPIServer", oldAPIServer)
			}
			if _, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
				t.Errorf("list namespaces with the apiserver stopped: no error")
			}
			restart := time.Now()
			if err := c.StartAPIServer(); err != nil {
				t.Fatalf("StartAPIServer: %v", err)
			}
			t.Logf("kube-apiserver ready again in %s", time.Since(restart).Round(time.Millisecond))
			listObjects(t, ctx, admin)
			if err := c.StartAPIServer(); err == nil {
				t.Errorf("StartAPIServer while running: no error")
			}

			// Every process ever started, the first apiserver included.
			all := c.PIDs()
			all["kube-apiserver (first)"] = oldAPIServer
			dir := c.Dir()
			if err := c.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			for name, pid := range all {
				if alive(pid) {
					t.Errorf("%s (pid %d) still running after Stop", name, pid)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cluster directory %s after Stop: %v, want it removed", dir, err)
			}
			if got := c.PIDs(); len(got) != 0 {
				t.Errorf("PIDs after Stop = %v, want none", got)
			}
		})
	}
}

// createObjects creates a namespace, a Node and a Pod bound to it by
// spec.nodeName, as the tests of the agent will.
func createObjects(t *testing.T, ctx context.Context, admin kubernetes.Interface, controllerManager bool) {
	t.Helper()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evictd-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if controllerManager {
		// The ServiceAccount admission refuses pods until the controller
		// manager has created the namespace's default ServiceAccount.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := admin.CoreV1().ServiceAccounts("evictd-test").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("default ServiceAccount of evictd-test not created by the controller manager: %v", err)
		}
	} else {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		if _, err := admin.CoreV1().ServiceAccounts("evictd-test").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ServiceAccount: %v", err)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"kubernetes.io/hostname": "node-a"}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	automount := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "evictd-test", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:                     "node-a",
			AutomountServiceAccountToken: &automount,
			Containers: []corev1.Container{{
				Name: "web", Image: "evictd.test/workload:1", ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	if _, err := admin.CoreV1().Pods("evictd-test").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
}

// listObjects checks that the objects of createObjects are listed.
func listObjects(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "node-a" {
		t.Errorf("nodes = %v, want [node-a]", names(nodes.Items))
	}
	nss, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	if got := names(nss.Items); !slices.Contains(got, "evictd-test") {
		t.Errorf("namespaces = %v, want evictd-test among them", got)
	}
	pods, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"})
	if err != nil {
		t.Fatalf("list pods of node-a: %v", err)
	}
	if got := names(pods.Items); !slices.Equal(got, []string{"web"}) {
		t.Errorf("pods of node-a = %v, want [web]", got)
	}
}

// checkIdentities checks that a token of Options.Tokens authenticates as its
// user and groups and is then subject to RBAC (403, not 401), and that an
// unknown token is refused with 401.
func checkIdentities(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	alice := kubernetes.NewForConfigOrDie(c.TokenConfig(c.Token("alice")))
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview as alice: %v", err)
	}
	if got := review.Status.UserInfo.Username; got != "alice" {
		t.Errorf("username = %q, want alice", got)
	}
	for _, g := range []string{"team-a", "team-b", "system:authenticated"} {
		if !slices.Contains(review.Status.UserInfo.Groups, g) {
			t.Errorf("groups = %v, want %s among them", review.Status.UserInfo.Groups, g)
		}
	}
	_, err = alice.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list secrets as alice: %v, want 403 Forbidden", err)
	}

	stranger := kubernetes.NewForConfigOrDie(c.TokenConfig("not-a-token"))
	_, err = stranger.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("list namespaces with an unknown token: %v, want 401 Unauthorized", err)
	}
}

// checkDisruptionController checks that the controller manager runs: a
// PodDisruptionBudget gets a status.
func checkDisruptionController(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "evictd-test"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if _, err := admin.PolicyV1().PodDisruptionBudgets("evictd-test").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := admin.PolicyV1().PodDisruptionBudgets("evictd-test").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Errorf("PodDisruptionBudget status not observed by the disruption controller: %v", err)
	}
}

// checkKubeconfig checks that WriteKubeconfig's file reaches the cluster as
// the token's user.
func checkKubeconfig(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(path, c.Token("alice")); err != nil {
		t.Fatalf("WriteKubeconfig: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview through the kubeconfig: %v", err)
	}
	if got := review.Status.UserInfo.Username; got != "alice" {
		t.Errorf("kubeconfig user = %q, want alice", got)
	}
}

// TestStartFailureCleansUp checks that a start that fails half-way (etcd up,
// kube-apiserver refusing its flags) stops etcd and removes its directory.
func TestStartFailureCleansUp(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c, err := Start(t.Context(), Options{APIServerFlags: []string{"--no-such-flag"}})
	if errors.Is(err, ErrNoBinaries) {
		t.Skipf("testcluster: %v", err)
	}
	if err == nil {
		c.Stop()
		t.Fatal("Start with an unknown kube-apiserver flag: no error")
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error = %v, want the end of kube-apiserver's log naming the flag", err)
	}
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes %v still running after a failed Start", kids)
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf("temporary directory holds %v (%v), want nothing", entries, err)
	}
}

func TestOptionsTokensRejected(t *testing.T) {
	for _, tokens := range []map[string][]string{
		{AdminUser: nil},
		{"a,b": nil},
		{"alice": {`te"am`}},
		{"": nil},
	} {
		if _, err := Start(t.Context(), Options{Tokens: tokens}); err == nil || errors.Is(err, ErrNoBinaries) {
			t.Errorf("Start with Tokens %q: %v, want an Options.Tokens error", tokens, err)
		}
	}
}

func TestBinaryUnknownName(t *testing.T) {
	if _, err := Binary("kubectl"); err == nil {
		t.Error("Binary(kubectl): no error")
	}
}

// alive reports whether a process with this PID exists.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// children returns the PIDs of this test process's live children.
func children(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	self := strconv.Itoa(os.Getpid())
	var kids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		_, rest, ok := strings.Cut(string(stat), ") ")
		if f := strings.Fields(rest); ok && len(f) > 1 && f[1] == self {
			kids = append(kids, pid)
		}
	}
	return kids
}

func names[T any, P interface {
	*T
	GetName() string
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}

// TestAuditLog checks that Options.Audit has kube-apiserver log each
// request, as JSON lines, to the given path, which outlives the cluster.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	c := StartForTest(t, Options{Audit: &Audit{Path: path, Policy: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`}})
	if got := c.AuditLogPath(); got != path {
		t.Fatalf("AuditLogPath() = %q, want %q", got, path)
	}
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	if _, err := admin.CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = `"requestURI":"/api/v1/namespaces/kube-system"`
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return false, nil
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, want) && strings.Contains(line, `"stage":"ResponseComplete"`) && strings.Contains(line, `"username":"`+AdminUser+`"`) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ResponseComplete event of the admin's GET in %s: %v", path, err)
	}
}
