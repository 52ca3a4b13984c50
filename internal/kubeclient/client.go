package kubeclient

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// Client reaches the core/v1, policy/v1 and coordination.k8s.io/v1
// resources evictd reads and writes, and the authentication.k8s.io/v1
// and authorization.k8s.io/v1 reviews with which it checks who scrapes
// its endpoints, with one HTTP client (one connection pool, one rate
// limiter per group as in client-go's clientset: a flood of reviews
// waits in its own, not in the pods' or the node's).
type Client struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	core   *rest.RESTClient // /api/v1
	policy *rest.RESTClient // /apis/policy/v1
	coord  *rest.RESTClient // /apis/coordination.k8s.io/v1
	authn  *rest.RESTClient // /apis/authentication.k8s.io/v1
	authz  *rest.RESTClient // /apis/authorization.k8s.io/v1
}

// NewScheme returns a scheme holding core/v1, policy/v1,
// coordination.k8s.io/v1, authentication.k8s.io/v1 and
// authorization.k8s.io/v1 and the meta
// types that go with them (options, Status, WatchEvent).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		v1.AddToScheme, policyv1.AddToScheme, coordinationv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build the API scheme: %w", err)
		}
	}
	return s, nil
}

// NewForConfig returns a Client for the API server of c, which it does not
// change. As with client-go's typed clients, the pod, node and
// PodDisruptionBudget clients prefer protobuf unless c sets a content type;
// other requests are JSON.
func NewForConfig(c *rest.Config) (*Client, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	restFor := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		g := rest.CopyConfig(cfg)
		g.GroupVersion, g.APIPath = &gv, apiPath
		rc, err := rest.RESTClientForConfigAndClient(g, httpClient)
		if err != nil {
			return nil, fmt.Errorf("API server client for %s: %w", gv, err)
		}
		return rc, nil
	}
	k := &Client{scheme: s, params: runtime.NewParameterCodec(s)}
	if k.core, err = restFor(v1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if k.policy, err = restFor(policyv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if k.coord, err = restFor(coordinationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if k.authn, err = restFor(authenticationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if k.authz, err = restFor(authorizationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return k, nil
}

// Scheme returns the client's scheme, for event recorders.
func (c *Client) Scheme() *runtime.Scheme { return c.scheme }

// Core returns the REST client of /api/v1, for requests the typed clients
// do not make as evictd needs them.
func (c *Client) Core() *rest.RESTClient { return c.core }

// Pods returns a client of the pods of namespace.
func (c *Client) Pods(namespace string) *gentype.ClientWithList[*v1.Pod, *v1.PodList] {
	return gentype.NewClientWithList("pods", c.core, c.params, namespace,
		func() *v1.Pod { return &v1.Pod{} }, func() *v1.PodList { return &v1.PodList{} },
		gentype.PrefersProtobuf[*v1.Pod]())
}

// Nodes returns a client of the nodes.
func (c *Client) Nodes() *gentype.ClientWithList[*v1.Node, *v1.NodeList] {
	return gentype.NewClientWithList("nodes", c.core, c.params, "",
		func() *v1.Node { return &v1.Node{} }, func() *v1.NodeList { return &v1.NodeList{} },
		gentype.PrefersProtobuf[*v1.Node]())
}

// Leases returns a client of the Leases of namespace.
func (c *Client) Leases(namespace string) *gentype.ClientWithList[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return gentype.NewClientWithList("leases", c.coord, c.params, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// TokenReviews returns a client of authentication.k8s.io/v1 TokenReviews:
// the API server says who a bearer token is. Call it on the client of
// evictd's own identity, not on NewForConfigAsNode's.
func (c *Client) TokenReviews() *gentype.Client[*authenticationv1.TokenReview] {
	return gentype.NewClient("tokenreviews", c.authn, c.params, "",
		func() *authenticationv1.TokenReview { return &authenticationv1.TokenReview{} },
		gentype.PrefersProtobuf[*authenticationv1.TokenReview]())
}

// SubjectAccessReviews returns a client of authorization.k8s.io/v1
// SubjectAccessReviews: the API server says whether a user may do
// something. Call it on the client of evictd's own identity.
func (c *Client) SubjectAccessReviews() *gentype.Client[*authorizationv1.SubjectAccessReview] {
	return gentype.NewClient("subjectaccessreviews", c.authz, c.params, "",
		func() *authorizationv1.SubjectAccessReview { return &authorizationv1.SubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SubjectAccessReview]())
}

// SelfSubjectAccessReviews returns a client of authorization.k8s.io/v1
// SelfSubjectAccessReviews: the API server says whether the client's own
// identity may do something (`evictd doctor`'s permission checks).
func (c *Client) SelfSubjectAccessReviews() *gentype.Client[*authorizationv1.SelfSubjectAccessReview] {
	return gentype.NewClient("selfsubjectaccessreviews", c.authz, c.params, "",
		func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SelfSubjectAccessReview]())
}

// EventSink returns a record.EventSink that writes each event in its own
// namespace, as client-go's EventSinkImpl does (in JSON, as it does).
func (c *Client) EventSink() record.EventSink { return eventSink{c.core} }

type eventSink struct{ rc *rest.RESTClient }

func (s eventSink) Create(ev *v1.Event) (*v1.Event, error) {
	return s.into(s.in(s.rc.Post(), ev).Body(ev))
}

func (s eventSink) Update(ev *v1.Event) (*v1.Event, error) {
	return s.into(s.in(s.rc.Put(), ev).Name(ev.Name).Body(ev))
}

func (s eventSink) Patch(ev *v1.Event, data []byte) (*v1.Event, error) {
	return s.into(s.in(s.rc.Patch(types.StrategicMergePatchType), ev).Name(ev.Name).Body(data))
}

// in addresses r to the events of ev's namespace.
func (eventSink) in(r *rest.Request, ev *v1.Event) *rest.Request {
	return r.NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events")
}

func (eventSink) into(r *rest.Request) (*v1.Event, error) {
	out := &v1.Event{}
	return out, r.Do(context.Background()).Into(out)
}

// NodeUser is the user name of node's own identity, the one the kubelet's
// client certificate carries: system:node:<node>.
func NodeUser(node string) string { return "system:node:" + node }

// NewForConfigAsNode returns a Client like NewForConfig's whose every
// request impersonates node's own identity (NodeUser) and nothing more:
// no group, UID or extra, which the API server then sets itself
// (system:nodes). On Kubernetes 1.36 and later (ConstrainedImpersonation)
// a ServiceAccount whose token is bound to node (its
// authentication.kubernetes.io/node-name) may do so with the verb
// impersonate:associated-node on nodes in authentication.k8s.io, for the
// requests that impersonate-on:associated-node:<verb> grants; the Node
// authorizer and the NodeRestriction admission plugin then judge the
// request as the kubelet's own, and refuse any pod bound to another node.
func NewForConfigAsNode(c *rest.Config, node string) (*Client, error) {
	if node == "" {
		return nil, errors.New("API server client as the node: no node name")
	}
	cfg := rest.CopyConfig(c)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: NodeUser(node)}
	return NewForConfig(cfg)
}

// PodOnNode reads the pod namespace/name from the API server if it is bound
// to node, with a list whose field selector names both the pod and the node:
// unlike a get, a node's identity may make it for any pod (the Node
// authorizer allows a node to list the pods it selects by spec.nodeName, but
// to get only the pods it already knows), and a pod that is gone or bound
// elsewhere reads as NotFound either way. Without a resourceVersion, the list
// is as fresh as a get (a consistent read). An answer that ignores the
// selector is checked item by item: only the pod of that name on node counts.
func (c *Client) PodOnNode(ctx context.Context, namespace, name, node string) (*v1.Pod, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", name), fields.OneTermEqualSelector("spec.nodeName", node))
	list, err := c.Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Namespace == namespace && p.Name == name && p.Spec.NodeName == node {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
}
