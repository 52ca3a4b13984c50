package deploy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestKustomize builds the kustomize base and the example overlay with the
// real kustomize and checks, on the decoded objects, that the namespace and
// the ServiceAccount reach every object that names them; and that the base
// is the plain manifests (the chart's defaults).
func TestKustomize(t *testing.T) {
	kustomize := tool(t, "kustomize")
	for _, tc := range []struct {
		dir string
		id  identity
	}{
		{"kustomize/base", identity{"kube-system", "evictd"}},
		{"kustomize/overlays/example", identity{"evictd-system", "node-evictd"}},
		{"kustomize/overlays/crio", identity{"kube-system", "evictd"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			out, err := run(kustomize, "build", tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			checkIdentity(t, objs, tc.id)
			if tc.dir == "kustomize/overlays/crio" {
				checkCRIO(t, renderedDaemonSet(t, objs), renderedConfig(t, objs))
			}
			if tc.id.namespace != "kube-system" {
				if ns := find(objs, "Namespace"); len(ns) != 1 || ns[0].u.GetName() != tc.id.namespace {
					t.Errorf("Namespace objects %v, want %s", ns, tc.id.namespace)
				}
			}
		})
	}
	t.Run("base is the plain manifests", func(t *testing.T) {
		out, err := run(kustomize, "build", "kustomize/base")
		if err != nil {
			t.Fatal(err)
		}
		// kustomize writes the policy's folded (>-) CEL again with an
		// empty line after each more-indented one: the same CEL, other
		// whitespace. Runs of white space compare equal.
		got := byID(t, decode(t, out))
		want := map[string][]byte{}
		for _, f := range kustomizeBase {
			for id, j := range byID(t, decodeFile(t, f)) {
				want[id] = j
			}
		}
		for id, j := range want {
			if string(got[id]) != string(j) {
				t.Errorf("%s: the base's\n%s\nthe plain file's\n%s", id, got[id], j)
			}
		}
		for id := range got {
			if want[id] == nil {
				t.Errorf("%s: in the base, not in the plain files", id)
			}
		}
	})
}

func decodeFile(t *testing.T, name string) []object {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

// byID returns every object's JSON by its kind, namespace and name, with
// every run of white space in its strings made one space.
func byID(t *testing.T, objs []object) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, o := range objs {
		j, err := json.Marshal(squeeze(o.u.Object))
		if err != nil {
			t.Fatal(err)
		}
		m[o.id()] = j
	}
	return m
}

// squeeze returns v with every run of white space in its strings made one
// space.
func squeeze(v any) any {
	switch x := v.(type) {
	case string:
		return strings.Join(strings.Fields(x), " ")
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = squeeze(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = squeeze(e)
		}
		return out
	}
	return v
}
