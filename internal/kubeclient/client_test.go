package kubeclient

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// TestPodOnNode: the read of one pod asks for it by name and node, and
// trusts no answer that ignores the selector: a pod of another name,
// namespace or node in the list is not the pod.
func TestPodOnNode(t *testing.T) {
	pod := func(ns, name, node string) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{NodeName: node}}
	}
	tests := []struct {
		name   string
		answer []v1.Pod
		want   string // the UID found; "" for NotFound
	}{
		{"the pod", []v1.Pod{pod("shop", "web", "node-a")}, "uid-web"},
		{"none", nil, ""},
		{"selector ignored: the pod on another node", []v1.Pod{pod("shop", "web", "node-b")}, ""},
		{"selector ignored: other pods", []v1.Pod{pod("shop", "db", "node-a"), pod("other", "web", "node-a")}, ""},
		{"selector ignored: the pod among others", []v1.Pod{pod("shop", "db", "node-a"), pod("shop", "web", "node-a")}, "uid-web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var query url.Values
			var path, impersonated string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path, query, impersonated = r.URL.Path, r.URL.Query(), r.Header.Get("Impersonate-User")
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: tc.answer})
			}))
			defer srv.Close()
			c, err := NewForConfigAsNode(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, "node-a")
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.PodOnNode(t.Context(), "shop", "web", "node-a")
			if path != "/api/v1/namespaces/shop/pods" || query.Get("fieldSelector") != "metadata.name=web,spec.nodeName=node-a" {
				t.Errorf("asked %s?%s, want a list of namespace shop selecting metadata.name=web,spec.nodeName=node-a", path, query.Encode())
			}
			if impersonated != "system:node:node-a" {
				t.Errorf("Impersonate-User %q, want system:node:node-a", impersonated)
			}
			switch {
			case tc.want == "" && !apierrors.IsNotFound(err):
				t.Errorf("got %v, %v; want NotFound", got, err)
			case tc.want != "" && (err != nil || string(got.UID) != tc.want):
				t.Errorf("got %v, %v; want the pod %s", got, err, tc.want)
			}
		})
	}
	if _, err := NewForConfigAsNode(&rest.Config{Host: "https://127.0.0.1:1"}, ""); err == nil {
		t.Error("NewForConfigAsNode without a node name: no error")
	}
}
