package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// EvictdNodeToken gives tests evictd's production identity on node: it
// creates the objects of the repository's deploy/rbac.yaml,
// deploy/policy.yaml and deploy/flowcontrol.yaml (once per cluster; they
// stay) with the admin client and returns a token of the kube-system/evictd ServiceAccount bound to the
// Node object node, which must exist. What evictd may do is then what RBAC
// grants and the admission policy lets its node do; its requests wait in
// its own priority level once the API server has loaded the FlowSchema.
func (c *Cluster) EvictdNodeToken(ctx context.Context, node string) (string, error) {
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("admin client: %w", err)
	}
	if err := c.applyDeploy(ctx, admin); err != nil {
		return "", err
	}
	token, err := NodeBoundToken(ctx, admin, "kube-system", "evictd", node)
	if err != nil {
		return "", err
	}
	if err := c.waitPolicy(ctx, token, node); err != nil {
		return "", err
	}
	return token, nil
}

// WriteEvictdKubeconfigVia waits until the Node object node exists, then
// writes at path a kubeconfig with a token of EvictdNodeToken bound to it,
// reaching the API server at server as WriteKubeconfigVia does. The file is
// renamed into place, so a node in a test guest polling for it never reads
// half of it.
func (c *Cluster) WriteEvictdKubeconfigVia(ctx context.Context, node, path, server, serverName string) error {
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("wait for node %s: %w", node, err)
	}
	token, err := c.EvictdNodeToken(ctx, node)
	if err != nil {
		return err
	}
	if err := c.WriteKubeconfigVia(path+".new", token, server, serverName); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
}

// waitPolicy waits until the API server, which learns of RBAC bindings and
// admission policies through watches, enforces both for token: RBAC lets it
// create events and the policy refuses one that claims to come from
// another node. The probe is a dry run: it creates nothing.
func (c *Cluster) waitPolicy(ctx context.Context, token, node string) error {
	client, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		return fmt.Errorf("evictd client: %w", err)
	}
	probe := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "policy-probe-", Namespace: metav1.NamespaceDefault},
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: node},
		Reason:         "PolicyProbe",
		Source:         v1.EventSource{Component: "evictd", Host: node + "-elsewhere"},
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "ValidatingAdmissionPolicy"), nil
	})
	if err != nil {
		return fmt.Errorf("evictd's identity on node %s: deploy/policy.yaml not enforced (last answer to a probe: %v): %w", node, last, err)
	}
	return nil
}

// applyDeploy creates the objects of deploy/rbac.yaml, deploy/policy.yaml
// and deploy/flowcontrol.yaml, leaving those that exist already.
func (c *Cluster) applyDeploy(ctx context.Context, admin kubernetes.Interface) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	for _, f := range []string{"rbac.yaml", "policy.yaml", "flowcontrol.yaml"} {
		if _, err := createManifest(ctx, admin, filepath.Join(root, "deploy", f), true); err != nil {
			return err
		}
	}
	return nil
}

// EvictdToken creates the objects of deploy/rbac.yaml alone and returns a
// token of the kube-system/evictd ServiceAccount bound to no node, for
// tests of the API-server libraries that act for several nodes. Such a
// token may write nothing where deploy/policy.yaml is applied: evictd
// itself runs with EvictdNodeToken.
func (c *Cluster) EvictdToken(ctx context.Context) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("admin client: %w", err)
	}
	if _, err := CreateManifest(ctx, admin, filepath.Join(root, "deploy", "rbac.yaml")); err != nil {
		return "", err
	}
	return ServiceAccountToken(ctx, admin, "kube-system", "evictd")
}

// CreateManifest creates, with client, every object of the multi-document
// YAML file at path. It knows the kinds deploy/ holds (ServiceAccount,
// ClusterRole, ClusterRoleBinding, Role, RoleBinding,
// ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
// MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
// PriorityLevelConfiguration, FlowSchema) and fails on any other, naming
// it; documents holding only comments are skipped. It returns the objects' kinds and names.
func CreateManifest(ctx context.Context, client kubernetes.Interface, path string) ([]string, error) {
	return createManifest(ctx, client, path, false)
}

// createManifest is CreateManifest; with keepExisting, an object that
// exists already is left as it is and not returned.
func createManifest(ctx context.Context, client kubernetes.Interface, path string, keepExisting bool) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	decode := scheme.Codecs.UniversalDeserializer().Decode
	var created []string
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return created, nil
		}
		if err != nil {
			return created, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return created, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(probe) == 0 {
			continue
		}
		obj, gvk, err := decode(bytes.TrimSpace(doc), nil, nil)
		if err != nil {
			return created, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		create := metav1.CreateOptions{}
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, create)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, create)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, create)
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, create)
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, create)
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, create)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, create)
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			_, err = client.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, o, create)
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			_, err = client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, o, create)
		case *flowcontrolv1.PriorityLevelConfiguration:
			_, err = client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, o, create)
		case *flowcontrolv1.FlowSchema:
			_, err = client.FlowcontrolV1().FlowSchemas().Create(ctx, o, create)
		default:
			return created, fmt.Errorf("%s: document %d: kind %s is not handled", path, i, gvk.Kind)
		}
		name := gvk.Kind + "/" + obj.(metav1.Object).GetName()
		if keepExisting && apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("%s: create %s: %w", path, name, err)
		}
		created = append(created, name)
	}
}

// NodeBoundToken returns a bearer token of the ServiceAccount
// namespace/name bound to the Node object node (valid for an hour, and no
// longer than the node exists): the API server adds the node's name to the
// token's user as the extra authentication.kubernetes.io/node-name.
func NodeBoundToken(ctx context.Context, client kubernetes.Interface, namespace, name, node string) (string, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s bound to node %s: %w", namespace, name, node, err)
	}
	ttl := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &ttl,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s bound to node %s: %w", namespace, name, node, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountToken returns a bearer token of the ServiceAccount
// namespace/name from the TokenRequest API, valid for an hour.
func ServiceAccountToken(ctx context.Context, client kubernetes.Interface, namespace, name string) (string, error) {
	ttl := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
