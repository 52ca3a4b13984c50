package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/config"
)

var update = flag.Bool("update", false, "write deploy/*.yaml from the chart (make manifests)")

// manifests are the plain files of deploy/ that the chart renders, each
// from its template of the same name, with every optional part on.
var manifests = []string{
	"rbac.yaml", "rbac-before-1.36.yaml", "rbac-auth-delegator.yaml", "policy.yaml", "flowcontrol.yaml", "daemonset.yaml",
	"daemonset-tolerations.yaml", "memory-pressure-toleration.yaml",
}

const allParts = "rbacBefore136: true\nmetricsDelegatedAuth: true\ndaemonsetTolerations: true\nmemoryPressureToleration: true\n"

// TestManifestsCurrent checks that deploy/*.yaml, and the copies in
// deploy/kustomize/base, are the chart's rendering with the default values
// (and the optional parts on): the chart is their source. `make manifests` (go test -run TestManifestsCurrent -update)
// writes them.
func TestManifestsCurrent(t *testing.T) {
	for _, f := range manifests {
		out, err := helmTemplate(t, allParts, "--show-only", "templates/"+f)
		if err != nil {
			t.Fatal(err)
		}
		want := plainManifest(f, out)
		paths := []string{f}
		if slices.Contains(kustomizeBase, f) {
			paths = append(paths, "kustomize/base/"+f)
		}
		for _, p := range paths {
			if *update {
				if err := os.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("deploy/%s is not the chart's rendering of templates/%s: run `make manifests` (and edit the chart, not the file)", p, f)
			}
		}
	}
	// The crio component's configuration file: the chart's with
	// values-crio.yaml.
	want := crioConfigPatch(t)
	if *update {
		if err := os.WriteFile(crioComponentConfig, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, err := os.ReadFile(crioComponentConfig); err != nil || !bytes.Equal(got, want) {
		t.Errorf("deploy/%s is not the chart's evictd-config with values-crio.yaml (%v): run `make manifests`", crioComponentConfig, err)
	}
}

// crioValues are the chart's values for CRI-O nodes, crioComponentConfig
// the kustomize component's copy of the configuration file they render.
const (
	crioValues          = chartDir + "/values-crio.yaml"
	crioComponentConfig = "kustomize/components/crio/config.yaml"
)

// crioConfigPatch renders the ConfigMap evictd-config with values-crio.yaml,
// as the crio component's patch (no namespace: the overlay's).
func crioConfigPatch(t *testing.T) []byte {
	t.Helper()
	values, err := os.ReadFile(crioValues)
	if err != nil {
		t.Fatal(err)
	}
	out, err := helmTemplate(t, string(values), "--show-only", "templates/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		if !strings.Contains(doc, "\n  name: evictd-config\n") {
			continue
		}
		var b bytes.Buffer
		b.WriteString("# Generated from deploy/chart/evictd/templates/daemonset.yaml with the chart's\n")
		b.WriteString("# values-crio.yaml by `make manifests`: edit the chart, not this file.\n")
		for _, line := range strings.Split(strings.TrimSpace(doc), "\n") {
			if strings.HasPrefix(line, "# Source: ") || line == "---" || strings.HasPrefix(line, "  namespace: ") {
				continue
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
		return b.Bytes()
	}
	t.Fatalf("no ConfigMap evictd-config in the chart's rendering with %s", crioValues)
	return nil
}

// kustomizeBase are the manifests of deploy/kustomize/base: copies, as
// kustomize reads no file outside a kustomization's directory and refuses
// a resource directory that holds the kustomization (deploy/ would).
var kustomizeBase = []string{"rbac.yaml", "policy.yaml", "flowcontrol.yaml", "daemonset.yaml"}

// plainManifest turns helm's rendering of one template into the plain
// file: a header saying where it comes from instead of helm's "# Source:"
// lines.
func plainManifest(name string, rendered []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# Generated from deploy/chart/evictd/templates/" + name + " with the chart's\n")
	b.WriteString("# default values by `make manifests`: edit the chart, not this file.\n")
	for i, line := range strings.Split(strings.TrimSpace(string(rendered)), "\n") {
		if strings.HasPrefix(line, "# Source: ") || (i == 0 && line == "---") {
			continue
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.Bytes()
}

// TestChartValues renders the chart with several sets of values and checks,
// on the decoded objects, that evictd's namespace and ServiceAccount reach
// every object that names them, and what each set changes.
func TestChartValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		id     identity
		check  func(t *testing.T, objs []object)
	}{{
		name: "defaults",
		id:   identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			ds := renderedDaemonSet(t, objs)
			checkRuntime(t, ds, renderedConfig(t, objs), "unix:///run/containerd/containerd.sock", map[string]string{"/run/containerd": "DirectoryOrCreate", "/var/lib/containerd": "DirectoryOrCreate"})
			for _, k := range []string{"Namespace", "Service", "ServiceMonitor", "PodMonitor", "PrometheusRule", "SecurityContextConstraints"} {
				if len(find(objs, k)) != 0 {
					t.Errorf("a %s with the default values", k)
				}
			}
			if sc := ds.Spec.Template.Spec.SecurityContext; sc != nil && sc.SELinuxOptions != nil {
				t.Errorf("SELinux options %+v without openshift.enabled", sc.SELinuxOptions)
			}
			if s := kubeconfigServer(t, objs); s != "https://kubernetes.default.svc" {
				t.Errorf("kubeconfig server %q", s)
			}
			checkProbes(t, ds, renderedConfig(t, objs), "127.0.0.1:9847", 9848)
			cfg := renderedConfig(t, objs)
			if !cfg.KubeconfigInCluster || cfg.LogFormat != "json" || cfg.StateDir != "/var/lib/evictd" || cfg.FlightRecords != 200 ||
				cfg.ProcRoot != "/host/proc" || cfg.CgroupMount != "/host/sys/fs/cgroup" || !cfg.HardEvictionDirectSignal {
				t.Errorf("the configuration file's defaults: %+v", cfg)
			}
		},
	}, {
		name:   "own namespace and ServiceAccount",
		values: "namespace: evictd-system\ncreateNamespace: true\nserviceAccount: {name: node-evictd}\napiServer: https://10.0.0.1:6443\n" + allParts,
		id:     identity{"evictd-system", "node-evictd"},
		check: func(t *testing.T, objs []object) {
			if ns := find(objs, "Namespace"); len(ns) != 1 || ns[0].u.GetName() != "evictd-system" {
				t.Errorf("Namespace objects %v, want evictd-system", ns)
			}
			if s := kubeconfigServer(t, objs); s != "https://10.0.0.1:6443" {
				t.Errorf("kubeconfig server %q", s)
			}
		},
	}, {
		name: "containerd paths changed",
		values: `runtime:
  endpoint: unix:///run/k3s/containerd/containerd.sock
  dirs:
  - {name: runtime-socket, path: /run/k3s/containerd, type: Directory, readOnly: false}
  - {name: runtime-root, path: /var/lib/rancher/k3s/agent/containerd, type: DirectoryOrCreate, readOnly: true}
kubeletRootDir: /var/lib/k0s/kubelet
podLogsDir: /srv/pods
procPressure: false
extraArgs: ["--eviction-hard=memory.available<500Mi"]
`,
		id: identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			ds := renderedDaemonSet(t, objs)
			checkRuntime(t, ds, renderedConfig(t, objs), "unix:///run/k3s/containerd/containerd.sock",
				map[string]string{"/run/k3s/containerd": "Directory", "/var/lib/rancher/k3s/agent/containerd": "DirectoryOrCreate"})
			c := ds.Spec.Template.Spec.Containers[0]
			cfg := renderedConfig(t, objs)
			if cfg.RootDir != "/var/lib/k0s/kubelet" || cfg.PodLogsDir != "/srv/pods" {
				t.Errorf("rootDir %s, podLogsDir %s in the configuration file", cfg.RootDir, cfg.PodLogsDir)
			}
			// extraArgs, after the chart's, override the file.
			if !hasArg(c.Args, "--eviction-hard=memory.available<500Mi") || cfg.Settings.HardSource != "--eviction-hard" {
				t.Errorf("args %q, hard thresholds from %q: want --eviction-hard from extraArgs", c.Args, cfg.Settings.HardSource)
			}
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil && (strings.Contains(v.HostPath.Path, "containerd") && !strings.Contains(v.HostPath.Path, "k3s") || v.HostPath.Path == "/proc/pressure") {
					t.Errorf("volume %s of %s left", v.Name, v.HostPath.Path)
				}
			}
			mounts := map[string]bool{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = true
			}
			for _, p := range []string{"/var/lib/k0s/kubelet", "/srv/pods", "/run/k3s/containerd", "/var/lib/rancher/k3s/agent/containerd"} {
				if !mounts[p] {
					t.Errorf("%s not mounted", p)
				}
			}
			if mounts["/host/proc/pressure"] {
				t.Error("/host/proc/pressure mounted with procPressure false")
			}
		},
	}, {
		name:   "CRI-O (values-crio.yaml)",
		values: readFile(t, crioValues),
		id:     identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			checkCRIO(t, renderedDaemonSet(t, objs), renderedConfig(t, objs))
		},
	}, {
		name: "monitoring on",
		values: `namespace: evictd-system
serviceAccount: {name: node-evictd}
metrics: {host: 0.0.0.0, port: 9900}
monitoring: {service: true, serviceMonitor: true, podMonitor: true, prometheusRule: true, labels: {release: prom}}
`,
		id: identity{"evictd-system", "node-evictd"},
		check: func(t *testing.T, objs []object) {
			checkMonitoring(t, objs, 9900)
			// Scrapers on the node's address; the probes still on
			// their own port on loopback.
			checkProbes(t, renderedDaemonSet(t, objs), renderedConfig(t, objs), "0.0.0.0:9900", 9848)
		},
	}, {
		name:   "direct signal off",
		values: "directSignal: false\nopenshift: {enabled: true}\n",
		id:     identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			ds := renderedDaemonSet(t, objs)
			c := ds.Spec.Template.Spec.Containers[0]
			if cfg := renderedConfig(t, objs); ds.Spec.Template.Spec.HostPID || slices.Contains(c.SecurityContext.Capabilities.Add, "KILL") || cfg.HardEvictionDirectSignal {
				t.Errorf("hostPID %v, capabilities %v, hardEvictionDirectSignal %v; want neither the host's PID namespace nor KILL, and the setting off",
					ds.Spec.Template.Spec.HostPID, c.SecurityContext.Capabilities.Add, cfg.HardEvictionDirectSignal)
			}
			scc := find(objs, "SecurityContextConstraints")
			if len(scc) != 1 {
				t.Fatalf("%d SecurityContextConstraints, want 1", len(scc))
			}
			if pid, _, _ := unstructured.NestedBool(scc[0].u.Object, "allowHostPID"); pid {
				t.Error("the SCC allows the host's PID namespace with directSignal false")
			}
			if caps, _, _ := unstructured.NestedStringSlice(scc[0].u.Object, "allowedCapabilities"); !slices.Equal(caps, []string{"DAC_READ_SEARCH"}) {
				t.Errorf("the SCC allows capabilities %v with directSignal false, want DAC_READ_SEARCH alone", caps)
			}
		},
	}, {
		name:   "probes' own port",
		values: "health: {port: 19848}\n",
		id:     identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			checkProbes(t, renderedDaemonSet(t, objs), renderedConfig(t, objs), "127.0.0.1:9847", 19848)
		},
	}, {
		name: "evictd's settings in config",
		values: `config:
  evictionHard: {memory.available: 700Mi, nodefs.available: "12%"}
  maxEvictionsPerHour: 30
  dryRun: true
  logFormat: text
  featureGates: {HugepageAwareEviction: false}
stateDir: ""
`,
		id: identity{"kube-system", "evictd"},
		check: func(t *testing.T, objs []object) {
			cfg := renderedConfig(t, objs)
			if want := map[string]string{"memory.available": "700Mi", "nodefs.available": "12%"}; !maps.Equal(cfg.Settings.Hard, want) {
				t.Errorf("evictionHard %v, want %v", cfg.Settings.Hard, want)
			}
			if cfg.MaxEvictionsPerHour != 30 || !cfg.DryRun || cfg.LogFormat != "text" || cfg.HugepageAwareEviction || cfg.FlightRecords != 0 {
				t.Errorf("got maxEvictionsPerHour %d, dryRun %v, logFormat %s, HugepageAwareEviction %v, flightRecords %d from the file",
					cfg.MaxEvictionsPerHour, cfg.DryRun, cfg.LogFormat, cfg.HugepageAwareEviction, cfg.FlightRecords)
			}
			// Other values than the defaults': another checksum, so
			// that the pods roll.
			def, err := helmTemplate(t, "")
			if err != nil {
				t.Fatal(err)
			}
			sum := func(objs []object) string {
				return renderedDaemonSet(t, objs).Spec.Template.Annotations["checksum/config"]
			}
			if a, b := sum(objs), sum(decode(t, def)); a == "" || a == b {
				t.Errorf("checksum/config %q, the defaults' %q: want a checksum, another one", a, b)
			}
		},
	}, {
		name:   "openshift",
		values: "namespace: evictd-system\nserviceAccount: {name: node-evictd}\nopenshift: {enabled: true}\n",
		id:     identity{"evictd-system", "node-evictd"},
		check: func(t *testing.T, objs []object) {
			checkOpenShift(t, objs, renderedDaemonSet(t, objs))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmTemplate(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			checkIdentity(t, objs, tc.id)
			tc.check(t, objs)
		})
	}
}

// checkProbes checks that evictd serves its metrics on metrics and answers
// the probes on 127.0.0.1:health (--healthz-bind-address), and that the
// liveness and readiness probes ask that port there, never the metrics
// address, whose connections anyone reaching it can hold.
func checkProbes(t *testing.T, ds *appsv1.DaemonSet, cfg *config.Config, metrics string, health int) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	healthAddr := "127.0.0.1:" + strconv.Itoa(health)
	if cfg.MetricsBindAddress != metrics || cfg.HealthzBindAddress != healthAddr {
		t.Errorf("metricsBindAddress %s, healthzBindAddress %s; want %s, %s", cfg.MetricsBindAddress, cfg.HealthzBindAddress, metrics, healthAddr)
	}
	for _, p := range []struct {
		name, path string
		probe      *v1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if got := net.JoinHostPort(g.Host, g.Port.String()); got != healthAddr || g.Path != p.path || g.Scheme != "" && g.Scheme != v1.URISchemeHTTP {
			t.Errorf("%s probe asks %s %s%s, want HTTP %s%s", p.name, g.Scheme, got, g.Path, healthAddr, p.path)
		}
	}
}

func renderedDaemonSet(t *testing.T, objs []object) *appsv1.DaemonSet {
	t.Helper()
	ds := find(objs, "DaemonSet")
	if len(ds) != 1 {
		t.Fatalf("%d DaemonSets", len(ds))
	}
	return ds[0].typed.(*appsv1.DaemonSet)
}

func kubeconfigServer(t *testing.T, objs []object) string {
	t.Helper()
	for _, o := range find(objs, "ConfigMap") {
		if _, ok := o.typed.(*v1.ConfigMap).Data["kubeconfig"]; !ok {
			continue
		}
		var kc struct {
			Clusters []struct {
				Cluster struct {
					Server string `json:"server"`
				} `json:"cluster"`
			} `json:"clusters"`
		}
		if err := yaml.Unmarshal([]byte(o.typed.(*v1.ConfigMap).Data["kubeconfig"]), &kc); err != nil || len(kc.Clusters) != 1 {
			t.Fatalf("%s: kubeconfig: %v", o.id(), err)
		}
		return kc.Clusters[0].Cluster.Server
	}
	t.Fatal("no kubeconfig ConfigMap")
	return ""
}

// checkRuntime checks the runtime endpoint and that the runtime's
// directories are mounted at their own paths from hostPath volumes of the
// given types.
func checkRuntime(t *testing.T, ds *appsv1.DaemonSet, cfg *config.Config, endpoint string, dirs map[string]string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if cfg.ContainerRuntimeEndpoint != endpoint {
		t.Errorf("containerRuntimeEndpoint %s: want the endpoint %s", cfg.ContainerRuntimeEndpoint, endpoint)
	}
	volumes := map[string]v1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for path, typ := range dirs {
		found := false
		for _, m := range spec.Containers[0].VolumeMounts {
			v, ok := volumes[m.Name]
			if ok && v.HostPath != nil && v.HostPath.Path == path {
				found = true
				if m.MountPath != path {
					t.Errorf("%s mounted at %s", path, m.MountPath)
				}
				if v.HostPath.Type == nil || string(*v.HostPath.Type) != typ {
					t.Errorf("%s: hostPath type %v, want %s", path, v.HostPath.Type, typ)
				}
			}
		}
		if !found {
			t.Errorf("%s not mounted", path)
		}
	}
}

// checkCRIO checks a rendering for CRI-O nodes: CRI-O's socket, its
// directories mounted (none of them a type that keeps the pod from
// starting on a node without them), and no containerd path anywhere in
// the DaemonSet or the configuration file.
func checkCRIO(t *testing.T, ds *appsv1.DaemonSet, cfg *config.Config) {
	t.Helper()
	checkRuntime(t, ds, cfg, "unix:///var/run/crio/crio.sock",
		map[string]string{"/var/run/crio": "DirectoryOrCreate", "/var/lib/containers/storage": "DirectoryOrCreate"})
	for name, v := range map[string]any{"the DaemonSet": ds, "the configuration file": cfg} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "containerd") {
			t.Errorf("%s names containerd: %s", name, b)
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The prometheus-operator objects, as monitoring.coreos.com/v1 documents
// them, the fields the chart writes: decoded strictly, a misspelt or
// misplaced field fails. (The CRDs are not installed in the test's API
// server: these are checked offline.)
type (
	relabel struct {
		SourceLabels []string `json:"sourceLabels,omitempty"`
		TargetLabel  string   `json:"targetLabel"`
		Replacement  *string  `json:"replacement,omitempty"`
	}
	endpoint struct {
		Port        string    `json:"port,omitempty"`
		PortNumber  int32     `json:"portNumber,omitempty"`
		Path        string    `json:"path"`
		Interval    string    `json:"interval"`
		Relabelings []relabel `json:"relabelings"`
	}
	monitorSpec struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints           []endpoint `json:"endpoints,omitempty"`
		PodMetricsEndpoints []endpoint `json:"podMetricsEndpoints,omitempty"`
	}
	monitor struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            monitorSpec       `json:"spec"`
	}
	prometheusRule struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Record      string            `json:"record,omitempty"`
					Alert       string            `json:"alert,omitempty"`
					Expr        string            `json:"expr"`
					For         string            `json:"for,omitempty"`
					Labels      map[string]string `json:"labels,omitempty"`
					Annotations map[string]string `json:"annotations,omitempty"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
)

func strict(t *testing.T, o object, into any) {
	t.Helper()
	j, err := o.u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(j, into); err != nil {
		t.Errorf("%s: %v", o.id(), err)
	}
}

func checkMonitoring(t *testing.T, objs []object, port int32) {
	t.Helper()
	svc := find(objs, "Service")
	if len(svc) != 1 {
		t.Fatalf("%d Services", len(svc))
	}
	s := svc[0].typed.(*v1.Service)
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != port || s.Spec.Ports[0].TargetPort.IntValue() != int(port) || s.Spec.Selector["app.kubernetes.io/name"] != "evictd" {
		t.Errorf("Service %+v", s.Spec)
	}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		ms := find(objs, kind)
		if len(ms) != 1 {
			t.Fatalf("%d %ss", len(ms), kind)
		}
		var m monitor
		strict(t, ms[0], &m)
		eps := m.Spec.Endpoints
		if kind == "PodMonitor" {
			eps = m.Spec.PodMetricsEndpoints
		}
		if m.Metadata.Labels["release"] != "prom" || !slices.Equal(m.Spec.NamespaceSelector.MatchNames, []string{ms[0].u.GetNamespace()}) || len(eps) != 1 {
			t.Fatalf("%s: %+v", kind, m)
		}
		ep := eps[0]
		if kind == "ServiceMonitor" && ep.Port != s.Spec.Ports[0].Name || kind == "PodMonitor" && ep.PortNumber != port {
			t.Errorf("%s: endpoint %+v", kind, ep)
		}
		labels := map[string]bool{}
		for _, r := range ep.Relabelings {
			labels[r.TargetLabel] = true
		}
		if !labels["job"] || !labels["node"] {
			t.Errorf("%s: relabelings %+v, want job and node", kind, ep.Relabelings)
		}
	}
	rules := find(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules", len(rules))
	}
	var pr prometheusRule
	strict(t, rules[0], &pr)
	// The same rules as deploy/monitoring/evictd-rules.yaml, the namespace
	// aside.
	plain, err := os.ReadFile("monitoring/evictd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ns := rules[0].u.GetNamespace()
	plain = bytes.ReplaceAll(plain, []byte(`namespace="kube-system"`), []byte(`namespace="`+ns+`"`))
	plain = bytes.ReplaceAll(plain, []byte(`kube-system/evictd-`), []byte(ns+`/evictd-`))
	var want map[string]any
	if err := yaml.Unmarshal(plain, &want); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(rules[0].u.Object["spec"])
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("PrometheusRule's spec is not deploy/monitoring/evictd-rules.yaml:\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

// TestChartRulesCopy checks that the chart's copy of the Prometheus rules
// is deploy/monitoring/evictd-rules.yaml (helm reads files only inside the
// chart).
func TestChartRulesCopy(t *testing.T) {
	want, err := os.ReadFile("monitoring/evictd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartDir + "/files/evictd-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/chart/evictd/files/evictd-rules.yaml differs from deploy/monitoring/evictd-rules.yaml: copy it (cp deploy/monitoring/evictd-rules.yaml deploy/chart/evictd/files/)")
	}
}

// TestChartRejects checks that bad values stop the rendering with an error
// naming the value, rather than rendering broken objects.
func TestChartRejects(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"namespace: Kube_System\n", "namespace"},
		{"namespace: \"\"\n", "namespace is required"},
		{"serviceAccount: {name: \"\"}\n", "serviceAccount.name is required"},
		{"serviceAccount: {name: Evictd}\n", "serviceAccount.name"},
		{"createNamespace: true\n", "createNamespace"},
		{"metrics: {port: 0}\n", "metrics.port"},
		{"health: {port: 0}\n", "health.port 0 is not a port number"},
		{"health: {port: 70000}\n", "health.port 70000 is not a port number"},
		{"health: {port: 9847}\n", "health.port 9847 is metrics.port"},
		{"metrics: {port: 9848}\n", "health.port 9848 is metrics.port"},
		{"monitoring: {serviceMonitor: true}\n", "monitoring.service"},
		{"monitoring: {service: true}\n", "metrics.host"},
		{"runtime: {dirs: [{name: x, path: relative}]}\n", "runtime.dirs[0].path"},
		{"runtime: {dirs: [{name: x, path: /x, type: File}]}\n", "runtime.dirs[0].type"},
		{"runtime: {dirs: [{name: proc, path: /x}]}\n", "runtime.dirs[0]"},
		{"runtime: {dirs: [{path: /x}]}\n", "runtime.dirs[0] needs a name"},
		{"runtime: {endpoint: \"\"}\n", "runtime.endpoint is required"},
		{"image: {repository: \"\"}\n", "image.repository is required"},
		{"config: {rootDir: /x}\n", "values: config.rootDir is the chart's: set kubeletRootDir instead"},
		{"config: {metricsBindAddress: \"0.0.0.0:1\"}\n", "values: config.metricsBindAddress is the chart's: set metrics.host and metrics.port instead"},
		{"config: {hostnameOverride: n1}\n", "values: config.hostnameOverride is the chart's"},
		{"config: {kind: KubeletConfiguration}\n", "values: config.kind is the chart's"},
		{"config: [dryRun]\n", "values: config must be a mapping"},
	} {
		_, err := helmTemplate(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: error %v, want one naming %q", tc.values, err, tc.want)
		}
	}
}

// TestHelmLint runs `helm lint --strict` with the default values and with
// every part on.
func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm")
	f := t.TempDir() + "/all.yaml"
	all := allParts + "namespace: evictd-system\ncreateNamespace: true\nmetrics: {host: 0.0.0.0}\n" +
		"monitoring: {service: true, serviceMonitor: true, podMonitor: true, prometheusRule: true}\nopenshift: {enabled: true}\n"
	if err := os.WriteFile(f, []byte(all), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, {"lint", "--strict", "--kube-version", kubeVersion, chartDir, "--values", f}} {
		if out, err := run(helm, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// checkRBACUse checks that a RoleBinding grants the ServiceAccount the use
// of the SecurityContextConstraints name.
func checkRBACUse(t *testing.T, objs []object, name string) {
	t.Helper()
	roles := map[string]*rbacv1.ClusterRole{}
	for _, o := range find(objs, "ClusterRole") {
		roles[o.u.GetName()] = o.typed.(*rbacv1.ClusterRole)
	}
	for _, o := range find(objs, "RoleBinding") {
		rb := o.typed.(*rbacv1.RoleBinding)
		r := roles[rb.RoleRef.Name]
		if rb.RoleRef.Kind != "ClusterRole" || r == nil {
			continue
		}
		for _, rule := range r.Rules {
			if slices.Equal(rule.APIGroups, []string{"security.openshift.io"}) && slices.Equal(rule.Resources, []string{"securitycontextconstraints"}) &&
				slices.Equal(rule.ResourceNames, []string{name}) && slices.Equal(rule.Verbs, []string{"use"}) {
				return
			}
		}
	}
	t.Errorf("no RoleBinding grants the use of SecurityContextConstraints %s", name)
}

// renderedConfig completes the configuration the rendered DaemonSet's
// evictd starts with: its args, $(NODE_NAME) and $(POD_NAMESPACE) expanded
// as the kubelet would, over config.yaml of the ConfigMap the pod mounts at
// /etc/evictd. The file must decode strictly, and the pod must mount it
// where --config names it.
func renderedConfig(t *testing.T, objs []object) *config.Config {
	t.Helper()
	ds := renderedDaemonSet(t, objs)
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	var text string
	for _, o := range find(objs, "ConfigMap") {
		if o.u.GetName() == "evictd-config" {
			text = o.typed.(*v1.ConfigMap).Data["config.yaml"]
		}
	}
	if text == "" {
		t.Fatal("no config.yaml in a ConfigMap evictd-config")
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/etc/evictd" {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				mounted = mounted || src.ConfigMap != nil && src.ConfigMap.Name == "evictd-config"
			}
		}
	}
	if !mounted || len(c.Args) == 0 || c.Args[0] != "--config=/etc/evictd/config.yaml" {
		t.Fatalf("args %q, the ConfigMap evictd-config mounted at /etc/evictd: %v; want --config=/etc/evictd/config.yaml first, and the file there", c.Args, mounted)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + path}
	for _, a := range c.Args[1:] {
		a = strings.ReplaceAll(a, "$(NODE_NAME)", "node-1")
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", ds.Namespace))
	}
	fs, opts := config.NewFlagSet("evictd")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("evictd's args %q: %v", args, err)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatalf("evictd's configuration (args %q):\n%s\n%v", args, text, err)
	}
	if cfg.Lenient != nil || cfg.Deprecations != nil {
		t.Errorf("config.yaml decoded leniently (%+v) or deprecated (%q):\n%s", cfg.Lenient, cfg.Deprecations, text)
	}
	if cfg.NodeName != "node-1" || cfg.LeaseNamespace != ds.Namespace || cfg.Kubeconfig != "/etc/evictd/kubeconfig" {
		t.Errorf("node %q, Lease namespace %q, kubeconfig %q: want the pod's node and namespace, the mounted kubeconfig", cfg.NodeName, cfg.LeaseNamespace, cfg.Kubeconfig)
	}
	return cfg
}
