package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

const (
	chartDir = "chart/evictd"
	// kubeVersion is the Kubernetes the chart is rendered for: the test
	// control plane's (hack/tools/k8s/go.mod).
	kubeVersion = "1.37.2"
)

// tool returns the path of helm or kustomize as hack/build-tools.sh builds
// them, or skips the test when they are missing; under CI=true a missing
// tool fails it (`make test` builds them first).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := testcluster.Binary(name)
	if errors.Is(err, testcluster.ErrNoTools) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true)", err)
		}
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a command and returns its standard output, or its error with
// its standard error.
func run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// helm keeps no state in the user's home for `template` and `lint`,
	// but reads its config paths: keep them out of the user's.
	tmp, err := os.MkdirTemp("", "evictd-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// helmTemplate renders the chart with the values (YAML) and extra
// arguments.
func helmTemplate(t *testing.T, values string, args ...string) ([]byte, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return run(tool(t, "helm"), append([]string{"template", "evictd", chartDir, "--kube-version", kubeVersion, "--values", f}, args...)...)
}

// object is one decoded document of a rendering: its typed form when the
// client's scheme knows its kind (decoded strictly: an unknown or
// duplicate field fails), and its unstructured form always.
type object struct {
	u     *unstructured.Unstructured
	typed runtime.Object
}

func (o object) id() string {
	return o.u.GetKind() + " " + o.u.GetNamespace() + "/" + o.u.GetName()
}

var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decode splits a multi-document YAML stream and decodes every object,
// skipping documents that hold only comments.
func decode(t *testing.T, data []byte) []object {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var m map[string]any
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if len(m) == 0 {
			continue
		}
		o := object{u: &unstructured.Unstructured{Object: m}}
		if scheme.Scheme.Recognizes(o.u.GroupVersionKind()) {
			typed, _, err := strictDecoder.Decode(bytes.TrimSpace(doc), nil, nil)
			if err != nil {
				t.Fatalf("document %d (%s): %v", i, o.id(), err)
			}
			o.typed = typed
		}
		objs = append(objs, o)
	}
}

// identity is where an install of evictd lives.
type identity struct{ namespace, serviceAccount string }

// checkIdentity checks that every object of objs that names evictd's
// namespace or ServiceAccount names id's: each namespaced object's
// namespace, every ServiceAccount subject, the admission policy's
// parameter, the FlowSchema's subject, the DaemonSet's ServiceAccount and
// Lease namespace, and the PrometheusRule's Lease selectors; and that no
// other namespace appears anywhere in the objects.
func checkIdentity(t *testing.T, objs []object, id identity) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.u.GetKind()] = true
		if namespaced[o.u.GetKind()] {
			if o.u.GetNamespace() != id.namespace {
				t.Errorf("%s: namespace %q, want %q", o.id(), o.u.GetNamespace(), id.namespace)
			}
		} else if o.u.GetNamespace() != "" {
			t.Errorf("%s: cluster-scoped with a namespace", o.id())
		}
		switch x := o.typed.(type) {
		case *v1.ServiceAccount:
			if x.Name != id.serviceAccount {
				t.Errorf("%s: want the name %q", o.id(), id.serviceAccount)
			}
		case *rbacv1.ClusterRoleBinding:
			checkSubjects(t, o.id(), x.Subjects, id)
		case *rbacv1.RoleBinding:
			checkSubjects(t, o.id(), x.Subjects, id)
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if pk := x.Spec.ParamKind; pk == nil || pk.APIVersion != "v1" || pk.Kind != "ServiceAccount" {
				t.Errorf("%s: paramKind %+v, want v1 ServiceAccount", o.id(), pk)
			}
			for _, mc := range x.Spec.MatchConditions {
				if !strings.Contains(mc.Expression, "params.metadata.namespace") || !strings.Contains(mc.Expression, "params.metadata.name") {
					t.Errorf("%s: matchCondition %s does not take the identity from params: %s", o.id(), mc.Name, mc.Expression)
				}
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			p := x.Spec.ParamRef
			if p == nil || p.Name != id.serviceAccount || p.Namespace != id.namespace {
				t.Errorf("%s: paramRef %+v, want %s/%s", o.id(), p, id.namespace, id.serviceAccount)
			} else if p.ParameterNotFoundAction == nil || *p.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
				t.Errorf("%s: parameterNotFoundAction %v, want Allow", o.id(), p.ParameterNotFoundAction)
			}
		case *flowcontrolv1.FlowSchema:
			var sas []string
			for _, r := range x.Spec.Rules {
				for _, s := range r.Subjects {
					if s.ServiceAccount == nil {
						t.Errorf("%s: a subject of kind %s", o.id(), s.Kind)
						continue
					}
					sas = append(sas, s.ServiceAccount.Namespace+"/"+s.ServiceAccount.Name)
				}
			}
			if want := id.namespace + "/" + id.serviceAccount; len(sas) != 1 || sas[0] != want {
				t.Errorf("%s: subjects %v, want [%s]", o.id(), sas, want)
			}
		case *appsv1.DaemonSet:
			checkDaemonSet(t, o.id(), x, id)
		}
		if o.u.GetKind() == "PrometheusRule" {
			checkRules(t, o, id.namespace)
		}
		// Nothing of the objects themselves (comments are not in them)
		// names another namespace.
		if id.namespace != "kube-system" {
			if j, _ := o.u.MarshalJSON(); bytes.Contains(j, []byte("kube-system")) {
				t.Errorf("%s names kube-system: %s", o.id(), j)
			}
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRoleBinding", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "FlowSchema", "DaemonSet", "ConfigMap"} {
		if !seen[k] {
			t.Errorf("no %s rendered", k)
		}
	}
}

// namespaced are the kinds of the renderings that have a namespace.
var namespaced = map[string]bool{
	"ServiceAccount": true, "Role": true, "RoleBinding": true, "ConfigMap": true, "DaemonSet": true,
	"Service": true, "ServiceMonitor": true, "PodMonitor": true, "PrometheusRule": true,
}

func checkSubjects(t *testing.T, what string, subjects []rbacv1.Subject, id identity) {
	t.Helper()
	if len(subjects) == 0 {
		t.Errorf("%s: no subjects", what)
	}
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Name != id.serviceAccount || s.Namespace != id.namespace {
			t.Errorf("%s: subject %+v, want ServiceAccount %s/%s", what, s, id.namespace, id.serviceAccount)
		}
	}
}

func checkDaemonSet(t *testing.T, what string, ds *appsv1.DaemonSet, id identity) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if spec.ServiceAccountName != id.serviceAccount {
		t.Errorf("%s: serviceAccountName %q, want %q", what, spec.ServiceAccountName, id.serviceAccount)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", what, len(spec.Containers))
	}
	c := spec.Containers[0]
	if !hasArg(c.Args, "--lease-namespace=$(POD_NAMESPACE)") {
		t.Errorf("%s: args %q, want --lease-namespace=$(POD_NAMESPACE)", what, c.Args)
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" {
			found = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		}
	}
	if !found {
		t.Errorf("%s: no env POD_NAMESPACE from the pod's metadata.namespace", what)
	}
}

func hasArg(args []string, arg string) bool {
	for _, a := range args {
		if a == arg {
			return true
		}
	}
	return false
}

// checkRules checks that a PrometheusRule's Lease alerts select the
// namespace ns, and no other.
func checkRules(t *testing.T, o object, ns string) {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(o.u.Object, "spec", "groups")
	leases := 0
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			expr, _ := r.(map[string]any)["expr"].(string)
			if !strings.Contains(expr, "kube_lease_renew_time") {
				continue
			}
			leases++
			if !strings.Contains(expr, fmt.Sprintf("namespace=%q", ns)) || strings.Count(expr, "namespace=") != strings.Count(expr, fmt.Sprintf("namespace=%q", ns)) {
				t.Errorf("%s: a Lease expression does not select namespace %q alone: %s", o.id(), ns, expr)
			}
		}
	}
	if leases == 0 {
		t.Errorf("%s: no rule reads kube_lease_renew_time", o.id())
	}
}

// find returns the objects of kind.
func find(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.u.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
