package agent

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// reasonThresholdSetAside is the reason of the Warning event on the node
// for a threshold set aside at start because it cannot hold there.
const reasonThresholdSetAside = "ThresholdSetAside"

// nodeEvents posts the loop's own events (manager.NodeEvents) on the node
// through the event recorder, which queues and sends them on its own.
type nodeEvents struct {
	recorder record.EventRecorder
	node     *v1.ObjectReference
}

func newNodeEvents(recorder record.EventRecorder, nodeName string) nodeEvents {
	// The kubelet refers to its node by name, with the name as UID.
	return nodeEvents{recorder: recorder, node: &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}}
}

func (e nodeEvents) Warn(reason, message string) {
	e.recorder.Event(e.node, v1.EventTypeWarning, reason, message)
}
