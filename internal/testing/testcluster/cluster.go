package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// AdminUser is the identity of AdminConfig, in the group system:masters.
const AdminUser = "testcluster-admin"

// The Service address range of every cluster and the kubernetes Service's
// address in it.
const (
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1"
)

// Options configures Start. The zero value runs etcd and kube-apiserver.
type Options struct {
	// Tokens adds identities to the static token file: user name → groups
	// (every authenticated user is also in system:authenticated). Each gets
	// a random bearer token, see Cluster.Token.
	Tokens map[string][]string
	// ControllerManager also runs kube-controller-manager, for PDB status,
	// default ServiceAccounts, ReplicaSets, garbage collection and node
	// lifecycle taints. Start then also waits for the default
	// ServiceAccount of the default namespace.
	ControllerManager bool
	// Scheduler also runs kube-scheduler, for pods created without a
	// nodeName (ReplicaSets, DaemonSets).
	Scheduler bool
	// Controllers is kube-controller-manager's --controllers; default "*"
	// (every controller that is on by default).
	Controllers []string
	// APIServerFlags are appended to kube-apiserver's flags; a flag given
	// again overrides the default.
	APIServerFlags []string
	// ReadyTimeout bounds the wait for each component to be ready; default
	// 60 s.
	ReadyTimeout time.Duration
	// Audit, when set, has kube-apiserver write an audit log.
	Audit *Audit
}

// Audit configures kube-apiserver's audit log: one JSON event per line
// (--audit-log-format json), written as each request reaches a stage the
// policy keeps, never rotated.
type Audit struct {
	// Policy is the audit policy, an audit.k8s.io/v1 Policy in YAML.
	Policy string
	// Path is where the log is written; default audit.log in the cluster's
	// directory, which Stop removes. A path outside it outlives the
	// cluster. A restarted kube-apiserver appends to it.
	Path string
}

// Cluster is a running control plane. Its methods are safe for concurrent use.
type Cluster struct {
	opts    Options
	dir     string
	pki     *pki
	bins    map[string]string
	tokens  map[string]string // user → bearer token
	etcdURL string
	apiPort int
	url     string
	readyIn time.Duration

	mu                                  sync.Mutex
	etcd, apiserver, ctrlMgr, scheduler *childproc.Process
	stopped                             bool
}

// Start starts etcd, kube-apiserver and, if asked, kube-controller-manager on
// free loopback ports, with their data, certificates and logs in a new
// temporary directory, and returns once all are ready. ctx bounds the start,
// not the processes' lives: they run until Stop. If Start fails it stops what
// it started and removes the directory; the error then carries the end of the
// failing component's log. It wraps ErrNoBinaries when binaries are missing.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = []string{"*"}
	}
	tokens, err := newTokens(opts.Tokens)
	if err != nil {
		return nil, err
	}
	names := []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		names = append(names, "kube-controller-manager")
	}
	if opts.Scheduler {
		names = append(names, "kube-scheduler")
	}
	bins := make(map[string]string, len(names))
	for _, name := range names {
		path, err := Binary(name)
		if err != nil {
			return nil, err
		}
		bins[name] = path
	}
	dir, err := os.MkdirTemp("", "evictd-testcluster-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{opts: opts, dir: dir, bins: bins, tokens: tokens}
	if opts.Audit != nil && opts.Audit.Path == "" {
		audit := *opts.Audit
		audit.Path = c.path("audit.log")
		c.opts.Audit = &audit
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	c.readyIn = time.Since(begin)
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	var err error
	if c.pki, err = writePKI(c.dir, net.ParseIP(serviceIP)); err != nil {
		return err
	}
	if err := c.writeTokenFile(); err != nil {
		return err
	}
	if a := c.opts.Audit; a != nil {
		if err := os.WriteFile(c.path("audit-policy.yaml"), []byte(a.Policy), 0o600); err != nil {
			return fmt.Errorf("write audit policy: %w", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, 0); err != nil {
		return err
	}
	if c.opts.ControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return err
		}
	}
	if c.opts.Scheduler {
		return c.startScheduler(ctx)
	}
	return nil
}

// newTokens gives AdminUser and every user of extra a random bearer token.
func newTokens(extra map[string][]string) (map[string]string, error) {
	if _, ok := extra[AdminUser]; ok {
		return nil, fmt.Errorf("Options.Tokens: user %q is reserved for the admin", AdminUser)
	}
	tokens := map[string]string{}
	for _, user := range append([]string{AdminUser}, sortedKeys(extra)...) {
		if err := validTokenField(user); err != nil {
			return nil, fmt.Errorf("Options.Tokens: user %q: %w", user, err)
		}
		for _, g := range extra[user] {
			if err := validTokenField(g); err != nil {
				return nil, fmt.Errorf("Options.Tokens: group %q of %q: %w", g, user, err)
			}
		}
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tokens[user] = hex.EncodeToString(b)
	}
	return tokens, nil
}

// validTokenField rejects what would break a line of the CSV token file.
func validTokenField(s string) error {
	if s == "" || strings.ContainsAny(s, ",\"\r\n") {
		return errors.New("must be non-empty, without commas, quotes or line breaks")
	}
	return nil
}

// writeTokenFile writes kube-apiserver's --token-auth-file: one
// token,user,uid,"groups" line per identity.
func (c *Cluster) writeTokenFile() error {
	var b strings.Builder
	for _, user := range sortedKeys(c.tokens) {
		groups := c.opts.Tokens[user]
		if user == AdminUser {
			groups = []string{"system:masters"}
		}
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", c.tokens[user], user, user, strings.Join(groups, ","))
	}
	return os.WriteFile(c.path("tokens.csv"), []byte(b.String()), 0o600)
}

// Stop stops every process of the cluster by PID (SIGTERM, SIGKILL after a
// bounded wait), waits for them to exit and removes the cluster's directory.
// Calling it again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	for _, p := range []*childproc.Process{c.scheduler, c.ctrlMgr, c.apiserver, c.etcd} {
		if p != nil {
			errs = append(errs, p.Stop(termGrace))
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
	}
	return errors.Join(errs...)
}

// StopAPIServer stops kube-apiserver (etcd and the controller manager keep
// running), to test what clients do while it is away.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver == nil {
		return nil
	}
	err := c.apiserver.Stop(termGrace)
	c.apiserver = nil
	return err
}

// StartAPIServer starts kube-apiserver again on the same port, with the same
// etcd, certificates and tokens, and waits until it is ready.
func (c *Cluster) StartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopped:
		return errors.New("cluster stopped")
	case c.apiserver != nil && !c.apiserver.Exited():
		return errors.New("kube-apiserver already running")
	}
	return c.startAPIServer(context.Background(), c.apiPort)
}

// AdminConfig returns a client configuration for AdminUser (system:masters),
// with client-side rate limiting relaxed for tests.
func (c *Cluster) AdminConfig() *rest.Config { return c.TokenConfig(c.tokens[AdminUser]) }

// TokenConfig returns a client configuration that authenticates with a bearer
// token: one from Token, or a ServiceAccount token from the TokenRequest API.
func (c *Cluster) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            c.url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), c.pki.caPEM...)},
		QPS:             100,
		Burst:           200,
	}
}

// Token returns the bearer token of a user of Options.Tokens or of AdminUser,
// or "" for an unknown user.
func (c *Cluster) Token(user string) string { return c.tokens[user] }

// URL returns kube-apiserver's address, https://127.0.0.1:<port>.
func (c *Cluster) URL() string { return c.url }

// CAFile returns the path of the PEM CA certificate that signs
// kube-apiserver's serving certificate.
func (c *Cluster) CAFile() string { return c.pki.caCert }

// AuditLogPath returns the path of the audit log, or "" when
// Options.Audit is not set.
func (c *Cluster) AuditLogPath() string {
	if c.opts.Audit == nil {
		return ""
	}
	return c.opts.Audit.Path
}

// Dir returns the cluster's temporary directory: certificates, tokens, etcd's
// data and one <component>.log per process.
func (c *Cluster) Dir() string { return c.dir }

// ReadyIn returns how long Start took.
func (c *Cluster) ReadyIn() time.Duration { return c.readyIn }

// PIDs returns the process IDs of the running components, by name.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := map[string]int{}
	for _, p := range []*childproc.Process{c.etcd, c.apiserver, c.ctrlMgr, c.scheduler} {
		if p != nil && !p.Exited() {
			pids[p.Name] = p.PID()
		}
	}
	return pids
}

// WriteKubeconfig writes a kubeconfig at path that reaches the cluster with a
// bearer token (the CA embedded), e.g. to run the evictd binary as a
// ServiceAccount.
func (c *Cluster) WriteKubeconfig(path, token string) error {
	return c.WriteKubeconfigVia(path, token, c.url, "")
}

// WriteKubeconfigVia is WriteKubeconfig for a client that reaches the API
// server at another address (server, e.g. a test guest's forwarded port),
// checking its serving certificate for serverName when that is set.
func (c *Cluster) WriteKubeconfigVia(path, token, server, serverName string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.pki.caPEM, TLSServerName: serverName}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "user"}
	cfg.CurrentContext = "testcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Logs returns the last n lines of each component's log, by name.
func (c *Cluster) Logs(n int) map[string]string {
	logs := map[string]string{}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(c.logPath(name)); err == nil {
			logs[name] = childproc.Tail(c.logPath(name), n)
		}
	}
	return logs
}

func (c *Cluster) path(name string) string { return filepath.Join(c.dir, name) }

func (c *Cluster) logPath(component string) string { return c.path(component + ".log") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
