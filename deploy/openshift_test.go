package deploy

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scc is security.openshift.io/v1 SecurityContextConstraints with the
// fields OpenShift 4 documents for it (the API reference of
// SecurityContextConstraints), written here: the module proxy serves
// github.com/openshift/api only as v3.9.0+incompatible, from 2018, without
// allowPrivilegeEscalation and the later fields. Decoded strictly, a field
// OpenShift does not know fails the test. Nothing here runs on OpenShift.
type scc struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`

	Priority                 *int32          `json:"priority"`
	AllowPrivilegedContainer bool            `json:"allowPrivilegedContainer"`
	DefaultAddCapabilities   []v1.Capability `json:"defaultAddCapabilities"`
	RequiredDropCapabilities []v1.Capability `json:"requiredDropCapabilities"`
	AllowedCapabilities      []v1.Capability `json:"allowedCapabilities"`
	AllowHostDirVolumePlugin bool            `json:"allowHostDirVolumePlugin"`
	Volumes                  []string        `json:"volumes"`
	AllowedFlexVolumes       []struct {
		Driver string `json:"driver"`
	} `json:"allowedFlexVolumes,omitempty"`
	AllowHostNetwork                bool  `json:"allowHostNetwork"`
	AllowHostPorts                  bool  `json:"allowHostPorts"`
	AllowHostPID                    bool  `json:"allowHostPID"`
	AllowHostIPC                    bool  `json:"allowHostIPC"`
	DefaultAllowPrivilegeEscalation *bool `json:"defaultAllowPrivilegeEscalation,omitempty"`
	AllowPrivilegeEscalation        *bool `json:"allowPrivilegeEscalation,omitempty"`
	SELinuxContext                  struct {
		Type           string             `json:"type"`
		SELinuxOptions *v1.SELinuxOptions `json:"seLinuxOptions,omitempty"`
	} `json:"seLinuxContext"`
	RunAsUser struct {
		Type        string `json:"type"`
		UID         *int64 `json:"uid,omitempty"`
		UIDRangeMin *int64 `json:"uidRangeMin,omitempty"`
		UIDRangeMax *int64 `json:"uidRangeMax,omitempty"`
	} `json:"runAsUser"`
	SupplementalGroups     groupStrategy `json:"supplementalGroups"`
	FSGroup                groupStrategy `json:"fsGroup"`
	ReadOnlyRootFilesystem bool          `json:"readOnlyRootFilesystem"`
	Users                  []string      `json:"users"`
	Groups                 []string      `json:"groups"`
	SeccompProfiles        []string      `json:"seccompProfiles,omitempty"`
	AllowedUnsafeSysctls   []string      `json:"allowedUnsafeSysctls,omitempty"`
	ForbiddenSysctls       []string      `json:"forbiddenSysctls,omitempty"`
	UserNamespaceLevel     string        `json:"userNamespaceLevel,omitempty"`
}

type groupStrategy struct {
	Type   string `json:"type"`
	Ranges []struct {
		Min int64 `json:"min"`
		Max int64 `json:"max"`
	} `json:"ranges,omitempty"`
}

// checkOpenShift checks the SecurityContextConstraints against the
// DaemonSet's pod: it allows everything the pod asks for and nothing
// more, and the ServiceAccount may use it.
func checkOpenShift(t *testing.T, objs []object, ds *appsv1.DaemonSet) {
	t.Helper()
	found := find(objs, "SecurityContextConstraints")
	if len(found) != 1 {
		t.Fatalf("%d SecurityContextConstraints", len(found))
	}
	if found[0].u.GetAPIVersion() != "security.openshift.io/v1" {
		t.Errorf("apiVersion %s", found[0].u.GetAPIVersion())
	}
	var s scc
	strict(t, found[0], &s)
	checkRBACUse(t, objs, s.Metadata.Name)

	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	// The pod's asks, each allowed.
	if pod.HostNetwork != s.AllowHostNetwork {
		t.Errorf("hostNetwork %v, allowHostNetwork %v", pod.HostNetwork, s.AllowHostNetwork)
	}
	// The direct SIGTERM's PID namespace (directSignal, on by default).
	if !pod.HostPID || !s.AllowHostPID {
		t.Errorf("hostPID %v, allowHostPID %v; want both for the direct SIGTERM", pod.HostPID, s.AllowHostPID)
	}
	var kinds []string
	hostPath := false
	for _, v := range pod.Volumes {
		k := ""
		switch {
		case v.HostPath != nil:
			k, hostPath = "hostPath", true
		case v.ConfigMap != nil:
			k = "configMap"
		case v.Projected != nil:
			k = "projected"
		default:
			t.Errorf("volume %s of a kind the test does not know", v.Name)
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	vols := slices.Clone(s.Volumes)
	slices.Sort(vols)
	if !slices.Equal(kinds, vols) || hostPath != s.AllowHostDirVolumePlugin {
		t.Errorf("volumes %v (allowHostDirVolumePlugin %v), the pod's %v", s.Volumes, s.AllowHostDirVolumePlugin, kinds)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || s.RunAsUser.Type != "MustRunAs" || s.RunAsUser.UID == nil || *s.RunAsUser.UID != 0 {
		t.Errorf("runAsUser: the pod's %v, the SCC's %+v", sc.RunAsUser, s.RunAsUser)
	}
	if !slices.Equal(c.SecurityContext.Capabilities.Add, s.AllowedCapabilities) || !slices.Equal(s.AllowedCapabilities, []v1.Capability{"DAC_READ_SEARCH", "KILL"}) {
		t.Errorf("capabilities: the pod adds %v, allowed %v", c.SecurityContext.Capabilities.Add, s.AllowedCapabilities)
	}
	if !slices.Equal(sc.Capabilities.Drop, s.RequiredDropCapabilities) || len(s.DefaultAddCapabilities) != 0 {
		t.Errorf("capabilities: the pod drops %v; required %v, added by default %v", sc.Capabilities.Drop, s.RequiredDropCapabilities, s.DefaultAddCapabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault || !slices.Equal(s.SeccompProfiles, []string{"runtime/default"}) {
		t.Errorf("seccomp: the pod's %v, allowed %v", sc.SeccompProfile, s.SeccompProfiles)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !s.ReadOnlyRootFilesystem {
		t.Errorf("readOnlyRootFilesystem: the pod's %v, the SCC's %v", sc.ReadOnlyRootFilesystem, s.ReadOnlyRootFilesystem)
	}
	if psc := pod.SecurityContext; psc == nil || psc.SELinuxOptions == nil || psc.SELinuxOptions.Type != "spc_t" ||
		s.SELinuxContext.Type != "MustRunAs" || s.SELinuxContext.SELinuxOptions == nil || *s.SELinuxContext.SELinuxOptions != *psc.SELinuxOptions {
		t.Errorf("SELinux: the pod's %+v, the SCC's %+v", pod.SecurityContext, s.SELinuxContext)
	}
	// Nothing more.
	if s.AllowPrivilegedContainer || s.AllowHostIPC || s.AllowHostPorts ||
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.DefaultAllowPrivilegeEscalation == nil || *s.DefaultAllowPrivilegeEscalation ||
		len(s.Users) != 0 || len(s.Groups) != 0 || len(s.AllowedUnsafeSysctls) != 0 || len(s.AllowedFlexVolumes) != 0 {
		t.Errorf("the SCC allows more than the pod needs: %+v", s)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || pod.HostIPC || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("the pod asks for more than the SCC allows: %+v", sc)
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 || pod.HostNetwork {
			t.Errorf("port %+v: a host port, which the SCC does not allow", p)
		}
	}
}
