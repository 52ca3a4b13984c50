package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables naming prebuilt binaries; the Makefile sets them.
const (
	// EnvK8sBinDir names a directory holding kube-apiserver,
	// kube-controller-manager, kube-scheduler and kubelet: the control
	// plane's and the default lane's kubelet.
	EnvK8sBinDir = "EVICTD_K8S_BIN_DIR"
	// EnvK8sPreviousBinDir names the directory holding LanePrevious's
	// kubelet.
	EnvK8sPreviousBinDir = "EVICTD_K8S_PREVIOUS_BIN_DIR"
	// EnvContainerdBinDir names the default lane's directory holding
	// containerd, containerd-shim-runc-v2 and ctr.
	EnvContainerdBinDir = "EVICTD_CONTAINERD_BIN_DIR"
	// EnvEtcdBin names the etcd binary.
	EnvEtcdBin = "EVICTD_ETCD_BIN"
	// EnvHelmBin names the helm binary the chart tests run.
	EnvHelmBin = "EVICTD_HELM_BIN"
	// EnvKustomizeBin names the kustomize binary the kustomize tests run.
	EnvKustomizeBin = "EVICTD_KUSTOMIZE_BIN"

	// EnvNodeLane selects the node the tests run: unset or empty for the
	// default lane, today's node (the kubelet of hack/tools/k8s/go.mod on
	// the containerd of hack/tools/containerd/go.mod), LanePrevious for
	// the previous one. The control plane is the same in both.
	EnvNodeLane = "EVICTD_NODE_LANE"
)

// LanePrevious is EnvNodeLane's value for the previous lane: the kubelet of
// hack/tools/k8s-previous/go.mod on the containerd on PATH (Debian 12's
// 1.6, hack/install-runtime.sh), against the default control plane.
const LanePrevious = "previous"

// Lane returns EnvNodeLane's value: "" (the default lane) or LanePrevious.
func Lane() (string, error) {
	switch l := os.Getenv(EnvNodeLane); l {
	case "", LanePrevious:
		return l, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q or nothing", EnvNodeLane, l, LanePrevious)
	}
}

// ContainerdBinDir returns the directory of the lane's containerd,
// containerd-shim-runc-v2 and ctr: in the default lane
// $EVICTD_CONTAINERD_BIN_DIR, else .cache/bin/containerd-<version>; ""
// in LanePrevious (they are the ones on PATH). Its error wraps
// ErrNoBinaries when one of them has not been built.
func ContainerdBinDir() (string, error) {
	lane, err := Lane()
	if lane == LanePrevious || err != nil {
		return "", err
	}
	dir := os.Getenv(EnvContainerdBinDir)
	if dir == "" {
		if dir, err = cacheDir("containerd", "containerd", "github.com/containerd/containerd/v2"); err != nil {
			return "", err
		}
	}
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := executable(filepath.Join(dir, name), ErrNoBinaries); err != nil {
			return "", err
		}
	}
	return dir, nil
}

const mainModule = "github.com/evictd/evictd"

// ErrNoBinaries is wrapped by the errors of Binary and Start when a binary of
// the control plane has not been built.
var ErrNoBinaries = errors.New("control plane binaries not built (run `make k8s-bins` or hack/build-k8s.sh)")

// ErrNoTools is wrapped by the errors of Binary when helm or kustomize has
// not been built.
var ErrNoTools = errors.New("deployment tools not built (run `make tools` or hack/build-tools.sh)")

// Binary returns the path of one of the control plane's binaries: "etcd",
// "kube-apiserver", "kube-controller-manager", "kube-scheduler" or "kubelet",
// or of the deployment tools: "helm" or "kustomize". It looks in
// $EVICTD_ETCD_BIN, $EVICTD_K8S_BIN_DIR, $EVICTD_HELM_BIN or
// $EVICTD_KUSTOMIZE_BIN, else in the repository's cache
// (.cache/bin/<name>-<version>/, the versions being those required by
// hack/tools/{etcd,k8s,helm,kustomize}/go.mod), found by walking up from the
// working directory to the main module's go.mod. With EnvNodeLane set to
// LanePrevious, the kubelet is $EVICTD_K8S_PREVIOUS_BIN_DIR's, else that
// of the version hack/tools/k8s-previous/go.mod requires.
func Binary(name string) (string, error) {
	var path string
	missing := ErrNoBinaries
	switch name {
	case "helm", "kustomize":
		missing = ErrNoTools
		env, module := EnvHelmBin, "helm.sh/helm/v3"
		if name == "kustomize" {
			env, module = EnvKustomizeBin, "sigs.k8s.io/kustomize/kustomize/v5"
		}
		path = os.Getenv(env)
		if path == "" {
			dir, err := cacheDir(name, name, module)
			if err != nil {
				return "", err
			}
			path = filepath.Join(dir, name)
		}
	case "etcd":
		path = os.Getenv(EnvEtcdBin)
		if path == "" {
			dir, err := cacheDir("etcd", "etcd", "go.etcd.io/etcd/server/v3")
			if err != nil {
				return "", err
			}
			path = filepath.Join(dir, name)
		}
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet":
		lane, err := Lane()
		if err != nil {
			return "", err
		}
		env, toolDir := EnvK8sBinDir, "k8s"
		if name == "kubelet" && lane == LanePrevious {
			env, toolDir = EnvK8sPreviousBinDir, "k8s-previous"
		}
		dir := os.Getenv(env)
		if dir == "" {
			if dir, err = cacheDir(toolDir, "k8s", "k8s.io/kubernetes"); err != nil {
				return "", err
			}
		}
		path = filepath.Join(dir, name)
	default:
		return "", fmt.Errorf("unknown binary %q", name)
	}
	return executable(path, missing)
}

// executable returns path if it is an executable file, else an error, which
// wraps missing if there is no such file.
func executable(path string, missing error) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", path, missing)
	}
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return path, nil
}

// cacheDir returns <repo>/.cache/bin/<tool>-<version>, the version being the
// one hack/tools/<toolDir>/go.mod requires of module.
func cacheDir(toolDir, tool, module string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	version, err := requiredVersion(filepath.Join(root, "hack", "tools", toolDir, "go.mod"), module)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin", tool+"-"+version), nil
}

// repoRoot walks up from the working directory (a package directory under
// `go test`) to the directory whose go.mod declares the main module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if m, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && m == mainModule {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of %s above %s; set %s and %s: %w", mainModule, wd, EnvK8sBinDir, EnvEtcdBin, ErrNoBinaries)
		}
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod string) (string, error) {
	var path string
	err := scanGoMod(gomod, func(fields []string) bool {
		if len(fields) == 2 && fields[0] == "module" {
			path = strings.Trim(fields[1], `"`)
			return false
		}
		return true
	})
	if err == nil && path == "" {
		err = fmt.Errorf("%s: no module line", gomod)
	}
	return path, err
}

// requiredVersion returns the version a go.mod requires of module, from a
// single-line require or one inside a require block.
func requiredVersion(gomod, module string) (string, error) {
	var version string
	inBlock := false
	err := scanGoMod(gomod, func(f []string) bool {
		switch {
		case len(f) == 2 && f[0] == "require" && f[1] == "(":
			inBlock = true
		case inBlock && len(f) == 1 && f[0] == ")":
			inBlock = false
		case len(f) >= 3 && f[0] == "require" && f[1] == module:
			version = f[2]
		case inBlock && len(f) >= 2 && f[0] == module:
			version = f[1]
		}
		return version == ""
	})
	if err == nil && version == "" {
		err = fmt.Errorf("%s does not require %s", gomod, module)
	}
	return version, err
}

// scanGoMod calls fn with the fields of each line of gomod, comments removed,
// until fn returns false.
func scanGoMod(gomod string, fn func(fields []string) bool) error {
	f, err := os.Open(gomod)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		if fields := strings.Fields(line); len(fields) > 0 && !fn(fields) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", gomod, err)
	}
	return nil
}
