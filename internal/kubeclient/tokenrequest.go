package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// TokenRequest asks for a token as authentication.k8s.io/v1 TokenRequest
// does, with the fields evictd sets. It is written here rather than taken
// from k8s.io/api/authentication/v1: the agent links only the API groups
// it reads and writes objects of (cmd/evictd's TestAgentLinksOnlyItsAPIGroups).
type TokenRequest struct {
	// Namespace and ServiceAccount name the ServiceAccount.
	Namespace, ServiceAccount string
	// Audiences are the token's audiences; none means the API server's.
	Audiences []string
	// Lifetime is the lifetime asked for, in whole seconds.
	Lifetime time.Duration
	// Node and NodeUID name the Node the token is bound to.
	Node, NodeUID string
}

// RequestToken creates a token of r.ServiceAccount bound to the Node
// r.Node through the TokenRequest API (create on serviceaccounts/token)
// and returns it. An answer without a token is an error.
func (c *Client) RequestToken(ctx context.Context, r TokenRequest) (string, error) {
	type boundRef struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		Name       string `json:"name"`
		UID        string `json:"uid,omitempty"`
	}
	secs := int64(r.Lifetime / time.Second)
	body, err := json.Marshal(map[string]any{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "TokenRequest",
		"spec": map[string]any{
			"audiences":         r.Audiences,
			"expirationSeconds": secs,
			"boundObjectRef":    boundRef{Kind: "Node", APIVersion: "v1", Name: r.Node, UID: r.NodeUID},
		},
	})
	if err != nil {
		return "", fmt.Errorf("TokenRequest of serviceaccount %s/%s: %w", r.Namespace, r.ServiceAccount, err)
	}
	res := c.core.Post().Namespace(r.Namespace).Resource("serviceaccounts").Name(r.ServiceAccount).SubResource("token").
		SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").
		Body(body).Do(ctx)
	// Error, unlike Raw, reads the API server's Status: a refusal keeps
	// its reason and message (Forbidden, the admission policy's words).
	if err := res.Error(); err != nil {
		return "", fmt.Errorf("TokenRequest of serviceaccount %s/%s: %w", r.Namespace, r.ServiceAccount, err)
	}
	raw, _ := res.Raw()
	var answer struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return "", fmt.Errorf("TokenRequest of serviceaccount %s/%s: the API server's answer is not a TokenRequest: %w", r.Namespace, r.ServiceAccount, err)
	}
	if answer.Status.Token == "" {
		return "", fmt.Errorf("TokenRequest of serviceaccount %s/%s: the API server's answer holds no token", r.Namespace, r.ServiceAccount)
	}
	return answer.Status.Token, nil
}
