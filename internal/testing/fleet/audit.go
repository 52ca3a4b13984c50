package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// AuditPolicy logs every request at Metadata level, but for the harness's
// own reads (the admin's informer and polls) and the health probes, which
// it drops, and the writes of the agents and of the emulated kubelets,
// which it logs at Request level: the request body the log then holds is
// what they wrote (a patch as sent; an object re-encoded as JSON).
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [testcluster-admin]
  verbs: [get, list, watch]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: Request
  users: ["system:serviceaccount:kube-system:evictd"]
  verbs: [create, update, patch, delete, deletecollection]
- level: Request
  userGroups: ["system:nodes"]
  verbs: [create, update, patch, delete, deletecollection]
- level: Metadata
`

// evictdUser is the ServiceAccount of deploy/rbac.yaml, and nodeNameExtra
// the extra the API server gives a token bound to a Node.
const (
	evictdUser    = "system:serviceaccount:kube-system:evictd"
	nodeNameExtra = "authentication.kubernetes.io/node-name"
)

// Who made a request.
type Who string

// The clients the fleet tells apart.
const (
	Evictd  Who = "evictd"
	Kubelet Who = "kubelet"
	Other   Who = "other"
)

// Request is one API request from the audit log.
type Request struct {
	AuditID string
	Who     Who
	// Node is the agent's or the kubelet's node ("" for others).
	Node                                         string
	User, UserAgent                              string
	Verb, Resource, Subresource, Namespace, Name string
	// ClusterWide is a list or watch whose field selector does not name
	// the client's node.
	ClusterWide bool
	// Code is the response's status code.
	Code int
	// Received is requestReceivedTimestamp; Completed the ResponseComplete
	// stage's timestamp, zero when the log holds no such stage (a watch
	// still open).
	Received, Completed time.Time
	// Bytes is the size of the request body the log holds: writes of the
	// agents and kubelets only (the policy logs the others' at Metadata).
	Bytes int
}

// IsWrite reports whether r changes something.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// IsNodeWrite reports whether r writes a Node object (or its status).
func (r Request) IsNodeWrite() bool { return r.Resource == "nodes" && r.IsWrite() }

// Latency is the time from the request's arrival to its response's end.
func (r Request) Latency() time.Duration {
	if r.Completed.IsZero() {
		return 0
	}
	return r.Completed.Sub(r.Received)
}

// Key names the request's kind: "verb resource[/subresource]".
func (r Request) Key() string {
	res := r.Resource
	if res == "" {
		res = "(non-resource)"
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	return r.Verb + " " + res
}

// auditEvent is the part of an audit.k8s.io/v1 Event the fleet reads.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage `json:"requestObject"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time       `json:"stageTimestamp"`
}

// ReadAudit reads the audit log at path: one Request per audit ID, from
// its ResponseStarted (watches) and ResponseComplete stages, in the order
// they were first logged.
func ReadAudit(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	byID := map[string]int{}
	var reqs []Request
	for line := 1; sc.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if ev.Stage != "ResponseStarted" && ev.Stage != "ResponseComplete" {
			continue
		}
		i, ok := byID[ev.AuditID]
		if !ok {
			i = len(reqs)
			byID[ev.AuditID] = i
			reqs = append(reqs, newRequest(ev))
		}
		if ev.ResponseStatus != nil && reqs[i].Code == 0 {
			reqs[i].Code = ev.ResponseStatus.Code
		}
		if ev.Stage == "ResponseComplete" {
			reqs[i].Completed = ev.StageTimestamp
			if ev.ResponseStatus != nil {
				reqs[i].Code = ev.ResponseStatus.Code
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return reqs, nil
}

func newRequest(ev auditEvent) Request {
	r := Request{
		AuditID:   ev.AuditID,
		Who:       Other,
		User:      ev.User.Username,
		UserAgent: ev.UserAgent,
		Verb:      ev.Verb,
		Received:  ev.RequestReceivedTimestamp,
		Bytes:     len(ev.RequestObject),
	}
	if ev.ObjectRef != nil {
		r.Resource, r.Subresource = ev.ObjectRef.Resource, ev.ObjectRef.Subresource
		r.Namespace, r.Name = ev.ObjectRef.Namespace, ev.ObjectRef.Name
	}
	switch {
	case ev.User.Username == evictdUser:
		r.Who = Evictd
		if v := ev.User.Extra[nodeNameExtra]; len(v) > 0 {
			r.Node = v[0]
		}
	case strings.HasPrefix(ev.User.Username, "system:node:"):
		r.Who, r.Node = Kubelet, strings.TrimPrefix(ev.User.Username, "system:node:")
	}
	if r.Verb == "list" || r.Verb == "watch" {
		r.ClusterWide = !namesNode(ev.RequestURI, r.Node)
	}
	return r
}

// namesNode reports whether the field selector of uri selects node's
// objects alone: metadata.name (the Node itself) or spec.nodeName (its
// pods) equal to node.
func namesNode(uri, node string) bool {
	if node == "" {
		return false
	}
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	for term := range strings.SplitSeq(u.Query().Get("fieldSelector"), ",") {
		key, val, ok := strings.Cut(strings.Replace(term, "==", "=", 1), "=")
		if ok && !strings.HasSuffix(key, "!") && val == node && (key == "metadata.name" || key == "spec.nodeName") {
			return true
		}
	}
	return false
}
