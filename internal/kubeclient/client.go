package kubeclient

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// Client reaches the core/v1, policy/v1 and coordination.k8s.io/v1
// resources evictd reads and writes, with one HTTP client (one connection pool, one rate limiter per
// group as in client-go's clientset).
type Client struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	core   *rest.RESTClient // /api/v1
	policy *rest.RESTClient // /apis/policy/v1
	coord  *rest.RESTClient // /apis/coordination.k8s.io/v1
}

// NewScheme returns a scheme holding core/v1, policy/v1 and
// coordination.k8s.io/v1 and the meta
// types that go with them (options, Status, WatchEvent).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, policyv1.AddToScheme, coordinationv1.AddToScheme} {
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
