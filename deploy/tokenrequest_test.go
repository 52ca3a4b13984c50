package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/kubeclient"
)

const tokenPolicyName = "evictd-token-request"

// refusedByTokenPolicy reports whether err is the refusal of the
// ValidatingAdmissionPolicy evictd-token-request, with want in its words.
func refusedByTokenPolicy(err error, want string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+tokenPolicyName+"'") && strings.Contains(err.Error(), want)
}

// tokenRequest asks client for a token of namespace/sa bound to ref for
// lifetime.
func tokenRequest(ctx context.Context, client kubernetes.Interface, namespace, sa string, ref *authenticationv1.BoundObjectReference, lifetime time.Duration) (*authenticationv1.TokenRequest, error) {
	secs := int64(lifetime / time.Second)
	return client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &secs, BoundObjectRef: ref,
	}}, metav1.CreateOptions{})
}

// TestPolicyTokenRequest takes the identity evictd has on node A and asks
// the TokenRequest API for every token it could want: its successor,
// bound to node A, which must pass; one bound to node B, to node A without
// its uid or of another uid, to a pod, to nothing, for longer than 720h,
// of another ServiceAccount, which the API server must refuse. It shows
// first that a ValidatingAdmissionPolicy sees the create of the
// serviceaccounts/token subresource at all, with the TokenRequest as its
// object. A token bound to a pod (a DaemonSet's) may request none.
func TestPolicyTokenRequest(t *testing.T) {
	c, e := newPolicyEnv(t)
	ctx := t.Context()
	nodes := map[string]*v1.Node{}
	for _, n := range []string{nodeA, nodeB} {
		node, err := e.admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[n] = node
	}
	bound := func(n string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n, UID: nodes[n].UID}
	}
	const lifetime = 10 * time.Minute

	// The policy is loaded through a watch: wait until it refuses node B.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = tokenRequest(ctx, e.onA, "kube-system", "evictd", bound(nodeB), lifetime)
		return refusedByTokenPolicy(last, ""), nil
	})
	if err != nil {
		t.Fatalf("the policy %s never refused node A's evictd a token bound to node B; last answer: %v (does a ValidatingAdmissionPolicy see serviceaccounts/token?)", tokenPolicyName, last)
	}
	if !strings.Contains(last.Error(), "may request only tokens bound to Node "+nodeA) {
		t.Errorf("refusal of node B's token: %v, want the policy's words", last)
	}

	// Its own successor passes, and is what was asked.
	tr, err := tokenRequest(ctx, e.onA, "kube-system", "evictd", bound(nodeA), lifetime)
	if err != nil {
		t.Fatalf("node A's evictd asking for its successor bound to node A: %v, want success", err)
	}
	claims, err := kubeclient.ParseToken(tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	if claims.Node != nodeA || string(claims.NodeUID) != string(nodes[nodeA].UID) || claims.ServiceAccount != "evictd" || claims.Lifetime() != lifetime {
		t.Errorf("successor's claims %+v; want evictd bound to node A for %s", claims, lifetime)
	}

	// A pod of evictd's ServiceAccount on node A, as a DaemonSet's.
	pod, err := e.admin.CoreV1().Pods("kube-system").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evictd-on-a", Namespace: "kube-system"},
		Spec: v1.PodSpec{
			NodeName: nodeA, ServiceAccountName: "evictd", AutomountServiceAccountToken: new(false),
			Containers: []v1.Container{{Name: "c", Image: "example.invalid/none"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name string
		ns   string
		sa   string
		ref  *authenticationv1.BoundObjectReference
		life time.Duration
		want string // the policy's words; "" for RBAC's refusal
	}{
		{"bound to node A without uid", "kube-system", "evictd", &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeA}, lifetime, "may request only tokens bound to Node " + nodeA},
		{"bound to node A, node B's uid", "kube-system", "evictd", &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeA, UID: nodes[nodeB].UID}, lifetime, "may request only tokens bound to Node"},
		{"bound to nothing", "kube-system", "evictd", nil, lifetime, "may request only tokens bound to Node"},
		{"bound to a pod on node A", "kube-system", "evictd", &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}, lifetime, "may request only tokens bound to Node"},
		{"for 721h", "kube-system", "evictd", bound(nodeA), 721 * time.Hour, "720h (2592000 s) at most"},
		{"of another ServiceAccount in kube-system", "kube-system", "default", bound(nodeA), lifetime, ""},
		{"of evictd in another namespace", ns, "evictd", bound(nodeA), lifetime, ""},
	}
	_, err = e.admin.CoreV1().ServiceAccounts("kube-system").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "evictd"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tokenRequest(ctx, e.onA, tc.ns, tc.sa, tc.ref, tc.life)
			switch {
			case tc.want == "" && !apierrors.IsForbidden(err):
				t.Errorf("got %v, want RBAC's refusal (Forbidden)", err)
			case tc.want != "" && !refusedByTokenPolicy(err, tc.want):
				t.Errorf("got %v, want the refusal of %s with %q", err, tokenPolicyName, tc.want)
			}
		})
	}

	// A token bound to a pod on node A (as a DaemonSet's is) carries node
	// A's name too, but may request no token.
	podTok, err := e.admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "evictd", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("admin minting a pod-bound token: %v", err)
	}
	fromPod, err := kubernetes.NewForConfig(c.TokenConfig(podTok.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenRequest(ctx, fromPod, "kube-system", "evictd", bound(nodeA), lifetime); !refusedByTokenPolicy(err, "not one bound to a pod") {
		t.Errorf("a pod-bound token asking for a node-bound one: got %v, want the refusal of %s", err, tokenPolicyName)
	}
}
