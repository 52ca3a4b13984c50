package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/lease"
)

// doctor's API server side: reachability with the agent's kubeconfig,
// the node object, and every permission the agent's requests need
// (deploy/rbac.yaml, deploy/rbac-before-1.36.yaml), asked of the API
// server by SelfSubjectAccessReviews of the agent's own identity.

// permission is one request the agent makes, as an access review asks it.
type permission struct {
	Attr authorizationv1.ResourceAttributes
	// Who needs it, for the report: "internal/nodestatus: ...".
	Why string
	// Optional: the agent runs without it (a warning, not a failure).
	Optional bool
	// Fix says what grants it.
	Fix string
}

// String names the access: "patch nodes/status n1", "create leases in kube-system".
func (p permission) String() string {
	a := p.Attr
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	s := a.Verb + " " + res
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	return s
}

// permissions lists what the agent with cfg asks of the API server.
// token is the claims of the kubeconfig's tokenFile, nil without one: a
// node-bound token with --token-renewal also needs its ServiceAccount's
// serviceaccounts/token.
func permissions(cfg *config.Config, token *kubeclient.TokenClaims) []permission {
	const (
		rbac   = "apply deploy/rbac.yaml (ClusterRole evictd, bound to evictd's ServiceAccount)"
		before = "apply deploy/rbac-before-1.36.yaml (--impersonate-node=false: evictd's own identity reads, evicts and deletes the node's pods)"
		leases = "apply deploy/rbac.yaml's Role and RoleBinding evictd-lease in --lease-namespace "
	)
	node := cfg.NodeName
	res := func(verb, group, resource, sub, ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	ps := []permission{
		{Attr: res("list", "", "nodes", "", "", node), Why: "internal/nodestatus watches its node", Fix: rbac},
		{Attr: res("watch", "", "nodes", "", "", node), Why: "internal/nodestatus watches its node", Fix: rbac},
		{Attr: res("patch", "", "nodes", "", "", node), Why: "internal/nodestatus writes its taints", Fix: rbac},
		{Attr: res("patch", "", "nodes", "status", "", node), Why: "internal/nodestatus writes its conditions", Fix: rbac},
		{Attr: res("patch", "", "pods", "status", "", ""), Why: "internal/evict writes an evicted pod's DisruptionTarget condition and terminal status", Fix: rbac},
		{Attr: res("create", "", "events", "", "", ""), Why: "events on pods and the node", Fix: rbac},
		{Attr: res("patch", "", "events", "", "", ""), Why: "a repeated event's count", Fix: rbac},
		{Attr: res("get", "coordination.k8s.io", "leases", "", cfg.LeaseNamespace, lease.Name(node)), Why: "internal/lease reads its Lease", Fix: leases + cfg.LeaseNamespace},
		{Attr: res("create", "coordination.k8s.io", "leases", "", cfg.LeaseNamespace, ""), Why: "internal/lease creates its Lease", Fix: leases + cfg.LeaseNamespace},
		{Attr: res("update", "coordination.k8s.io", "leases", "", cfg.LeaseNamespace, lease.Name(node)), Why: "internal/lease renews its Lease", Fix: leases + cfg.LeaseNamespace},
	}
	if cfg.ImpersonateNode {
		const imp = "impersonate-on:associated-node:"
		ps = append(ps,
			permission{Attr: res("impersonate:associated-node", "authentication.k8s.io", "nodes", "", "", node), Why: "--impersonate-node: act as system:node:" + node + " (Kubernetes 1.36, or 1.35 with ConstrainedImpersonation; a token bound to this node)", Fix: rbac},
			permission{Attr: res(imp+"list", "", "pods", "", "", ""), Why: "internal/podsource lists the node's pods as the node", Fix: rbac},
			permission{Attr: res(imp+"watch", "", "pods", "", "", ""), Why: "internal/podsource watches the node's pods as the node", Fix: rbac},
			permission{Attr: res(imp+"delete", "", "pods", "", "", ""), Why: "internal/evict deletes an evicted pod as the node", Fix: rbac},
			permission{Attr: res(imp+"create", "", "pods", "eviction", "", ""), Why: "internal/evict evicts a pod as the node", Fix: rbac},
		)
	} else {
		ps = append(ps,
			permission{Attr: res("list", "", "pods", "", "", ""), Why: "internal/podsource lists the node's pods", Fix: before},
			permission{Attr: res("watch", "", "pods", "", "", ""), Why: "internal/podsource watches the node's pods", Fix: before},
			permission{Attr: res("delete", "", "pods", "", "", ""), Why: "internal/evict deletes an evicted pod", Fix: before},
			permission{Attr: res("create", "", "pods", "eviction", "", ""), Why: "internal/evict evicts a pod", Fix: before},
		)
	}
	if cfg.TokenRenewal && token != nil && token.NodeBound() == nil {
		ps = append(ps, permission{Attr: res("create", "", "serviceaccounts", "token", token.Namespace, token.ServiceAccount), Optional: true,
			Why: "--token-renewal renews the kubeconfig's node-bound token (without it the token must be renewed by hand)",
			Fix: "apply deploy/rbac.yaml's Role and RoleBinding evictd-token in " + token.Namespace + "; or set --token-renewal=false and renew the token by hand"})
	}
	if cfg.MetricsDelegatedAuth {
		const auth = "bind ClusterRole system:auth-delegator to evictd's ServiceAccount (deploy/rbac-auth-delegator.yaml)"
		ps = append(ps,
			permission{Attr: res("create", "authentication.k8s.io", "tokenreviews", "", "", ""), Why: "--metrics-delegated-auth reviews the scrapers' tokens", Fix: auth},
			permission{Attr: res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), Why: "--metrics-delegated-auth reviews the scrapers' access", Fix: auth},
		)
	}
	return ps
}

// apiChecks reaches the API server as the agent would: /version, its node,
// then each permission. Standalone, every one is skipped with the reason.
func apiChecks(ctx context.Context, cfg *config.Config) []check {
	const name = "API server"
	switch {
	case cfg.Kubeconfig == "":
		return []check{{Name: name, Status: statusSkip, Message: "no --kubeconfig: the agent runs standalone, " + cfg.StandaloneActs() + "; nothing to check on an API server"}}
	case evictdagent.KubeconfigAwaited(cfg):
		return []check{{Name: name, Status: statusSkip, Message: fmt.Sprintf("--kubeconfig %s does not exist yet (--kubeconfig-optional): the agent starts standalone, %s; run doctor again once it is written", cfg.Kubeconfig, cfg.StandaloneActs())}}
	}
	rc, err := evictdagent.KubeRestConfig(cfg, os.Getenv)
	if err != nil {
		return []check{{Name: name, Status: statusFail, Message: err.Error(), Fix: "the agent would refuse this kubeconfig: fix what the message names"}}
	}
	var claims *kubeclient.TokenClaims
	if rc.BearerTokenFile != "" {
		if b, err := os.ReadFile(rc.BearerTokenFile); err == nil {
			if c, err := kubeclient.ParseToken(string(b)); err == nil {
				claims = &c
			}
		}
	}
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		return []check{{Name: name, Status: statusFail, Message: fmt.Sprintf("--kubeconfig %s: %v", cfg.Kubeconfig, err), Fix: "fix the kubeconfig"}}
	}
	var out []check
	vctx, cancel := context.WithTimeout(ctx, apiTimeout)
	raw, err := client.Core().Get().AbsPath("/version").DoRaw(vctx)
	cancel()
	if err != nil {
		out = append(out, check{Name: name, Status: statusFail, Message: fmt.Sprintf("%s: GET /version: %v", rc.Host, err),
			Fix: "check the kubeconfig's server, the network path from the node to the API server, and its certificate authority"})
		return append(out, check{Name: "permissions", Status: statusSkip, Message: "the API server cannot be reached"})
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.GitVersion == "" {
		out = append(out, check{Name: name, Status: statusWarn, Message: fmt.Sprintf("%s: /version answered %.80q, which is no Kubernetes version", rc.Host, raw),
			Fix: "check that the kubeconfig's server is a kube-apiserver"})
	} else {
		out = append(out, check{Name: name, Status: statusOK, Message: fmt.Sprintf("%s answers: Kubernetes %s", rc.Host, v.GitVersion)})
	}
	out = append(out, nodeCheck(ctx, client, cfg.NodeName))
	for _, p := range permissions(cfg, claims) {
		out = append(out, reviewCheck(ctx, client, p))
	}
	return out
}

// nodeCheck reads the node as the agent's informer does: a list selecting
// it by name (evictd's identity has no get on nodes).
func nodeCheck(ctx context.Context, client *kubeclient.Client, node string) check {
	const name = "node"
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := client.Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	switch {
	case apierrors.IsForbidden(err):
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("list node %s: %v", node, err), Fix: "apply deploy/rbac.yaml (ClusterRole evictd: list and watch nodes)"}
	case err != nil:
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("list node %s: %v", node, err), Fix: "check the API server's health"}
	}
	for _, n := range list.Items {
		if n.Name == node {
			return check{Name: name, Status: statusOK, Message: fmt.Sprintf("node %s is registered (uid %s)", node, n.UID)}
		}
	}
	return check{Name: name, Status: statusFail, Message: fmt.Sprintf("node %s is not registered on the API server", node),
		Fix: "set --hostname-override to the name the kubelet registers the node under; or start the kubelet first"}
}

// reviewCheck asks the API server whether the agent's identity may make
// the request p.
func reviewCheck(ctx context.Context, client *kubeclient.Client, p permission) check {
	attr := p.Attr
	name := "permission " + p.String()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	r, err := client.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr},
	}, metav1.CreateOptions{})
	if err != nil {
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("SelfSubjectAccessReview: %v", err), Fix: "check the API server's health; every identity may create SelfSubjectAccessReviews"}
	}
	if r.Status.Allowed {
		return check{Name: name, Status: statusOK, Message: p.Why}
	}
	why := strings.TrimSpace(r.Status.Reason + " " + r.Status.EvaluationError)
	if why == "" {
		why = "no rule allows it"
	}
	status := statusFail
	if p.Optional {
		status = statusWarn
	}
	return check{Name: name, Status: status, Message: fmt.Sprintf("denied (%s): %s", why, p.Why), Fix: p.Fix}
}
