package cri

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// annotationConfigSource is the annotation in which the kubelet records
// where a pod came from: "api" for a pod of the API server, "file" or
// "http" for a static pod. The kubelet sets it on every pod it runs, over
// any value of the pod's own, and passes the pod's annotations to the
// runtime with its sandbox.
const annotationConfigSource = "kubernetes.io/config.source"

// ConfigSourceAPI is annotationConfigSource's value for a pod of the API
// server.
const ConfigSourceAPI = "api"

// Sandbox is what the runtime knows of a pod from its ready sandbox.
type Sandbox struct {
	Namespace, Name, UID string
	// Source is the kubelet's kubernetes.io/config.source of the pod
	// (ConfigSourceAPI, "file", "http"), "" when the sandbox has none.
	Source string
	// Created is when the runtime created the sandbox (zero when it
	// does not say).
	Created time.Time
}

// ReadySandboxes lists the pods of the ready sandboxes, keyed by pod UID:
// the pods the kubelet runs on this node as the runtime sees them. A
// sandbox without a pod UID (not the kubelet's) is left out.
func (c *Client) ReadySandboxes(ctx context.Context) (map[string]Sandbox, error) {
	sbs, err := c.listPodSandboxesWith(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil, err
	}
	return sandboxesOf(sbs), nil
}

// sandboxesOf keys the ready sandboxes sbs by pod UID, the metadata's or,
// where it has none, the kubelet's label's.
func sandboxesOf(sbs []*runtimeapi.PodSandbox) map[string]Sandbox {
	out := make(map[string]Sandbox, len(sbs))
	for _, sb := range sbs {
		md := sb.GetMetadata()
		uid := md.GetUid()
		if uid == "" {
			uid = sb.GetLabels()[labelPodUID]
		}
		if uid == "" {
			continue
		}
		var created time.Time
		if ns := sb.GetCreatedAt(); ns > 0 {
			created = time.Unix(0, ns)
		}
		out[uid] = Sandbox{Namespace: md.GetNamespace(), Name: md.GetName(), UID: uid,
			Source: sb.GetAnnotations()[annotationConfigSource], Created: created}
	}
	return out
}
