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

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// EvictdToken gives tests evictd's production identity: it creates the
// objects of the repository's deploy/rbac.yaml with the admin client and
// returns a bearer token of the kube-system/evictd ServiceAccount, so that
// what evictd is allowed to do is what that manifest grants.
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
// YAML file at path. It knows the kinds an RBAC manifest holds
// (ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding) and
// fails on any other, naming it; documents holding only comments are
// skipped. It returns the objects' kinds and names.
func CreateManifest(ctx context.Context, client kubernetes.Interface, path string) ([]string, error) {
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
		default:
			return created, fmt.Errorf("%s: document %d: kind %s is not handled", path, i, gvk.Kind)
		}
		name := gvk.Kind + "/" + obj.(metav1.Object).GetName()
		if err != nil {
			return created, fmt.Errorf("%s: create %s: %w", path, name, err)
		}
		created = append(created, name)
	}
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
