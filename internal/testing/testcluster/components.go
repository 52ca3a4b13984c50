package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// How many times a component is started on fresh ports when another process
// took one of them between the choice and the bind.
const portAttempts = 5

// startEtcd starts a single-member etcd on two free loopback ports (client,
// peer) and waits until it is healthy. The caller holds c.mu.
func (c *Cluster) startEtcd(ctx context.Context) error {
	dataDir := c.path("etcd")
	p, ports, err := c.startOnFreePorts(ctx, "etcd", 2, func(ports []int) []string {
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		return []string{
			"--name=testcluster",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=testcluster=" + peer,
			// Test data is thrown away: no fsync makes writes fast.
			"--unsafe-no-fsync=true",
		}
	}, func(ctx context.Context, ports []int) error {
		body, err := get(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/health", "")
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("unhealthy: %s", body)
		}
		return err
	}, func() error { return os.RemoveAll(dataDir) })
	if err != nil {
		return err
	}
	c.etcd, c.etcdURL = p, "http://127.0.0.1:"+strconv.Itoa(ports[0])
	return nil
}

// startAPIServer starts kube-apiserver on port, or on a free one (which then
// becomes the cluster's URL) if port is 0, and waits until /readyz answers
// ok. The caller holds c.mu.
func (c *Cluster) startAPIServer(ctx context.Context, port int) error {
	var audit []string
	if a := c.opts.Audit; a != nil {
		audit = []string{
			"--audit-policy-file=" + c.path("audit-policy.yaml"),
			"--audit-log-path=" + a.Path,
			"--audit-log-format=json",
			"--audit-log-maxsize=0",
		}
	}
	args := func(ports []int) []string {
		return append(append([]string{
			"--etcd-servers=" + c.etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + c.pki.servingCert,
			"--tls-private-key-file=" + c.pki.servKey,
			"--client-ca-file=" + c.pki.caCert,
			"--token-auth-file=" + c.path("tokens.csv"),
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--service-account-key-file=" + c.pki.saPub,
			"--service-account-signing-key-file=" + c.pki.saKey,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--allow-privileged=true",
			"--profiling=false",
			// Endpoints may not be loopback addresses: do not publish the
			// kubernetes Service's endpoints (nothing here uses them).
			"--endpoint-reconciler-type=none",
			// On SIGTERM, answer 429 until in-flight requests are done, then
			// close within 2 s; else open watches (the controller
			// manager's) hold the server for --request-timeout (60 s).
			"--shutdown-send-retry-after=true",
		}, audit...), c.opts.APIServerFlags...)
	}
	client, err := c.httpClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	ready := func(ctx context.Context, ports []int) error {
		_, err := get(ctx, client, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/readyz", c.tokens[AdminUser])
		return err
	}

	var p *childproc.Process
	if port == 0 {
		var ports []int
		if p, ports, err = c.startOnFreePorts(ctx, "kube-apiserver", 1, args, ready, nil); err != nil {
			return err
		}
		c.apiPort, c.url = ports[0], "https://127.0.0.1:"+strconv.Itoa(ports[0])
	} else {
		ports := []int{port}
		if p, err = childproc.Start("kube-apiserver", c.bins["kube-apiserver"], args(ports), c.logPath("kube-apiserver")); err != nil {
			return err
		}
		if err := c.waitReady(ctx, p, func(ctx context.Context) error { return ready(ctx, ports) }); err != nil {
			return errors.Join(err, p.Stop(termGrace))
		}
	}
	c.apiserver = p
	return nil
}

// startControllerManager starts kube-controller-manager with admin
// credentials and waits until it is healthy and has created the default
// ServiceAccount of the default namespace. The caller holds c.mu.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	kubeconfig := c.path("admin.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, c.tokens[AdminUser]); err != nil {
		return err
	}
	apiClient, err := c.httpClient()
	if err != nil {
		return err
	}
	defer apiClient.CloseIdleConnections()
	// Its serving certificate is self-signed, in its --cert-dir.
	selfClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer selfClient.CloseIdleConnections()

	p, _, err := c.startOnFreePorts(ctx, "kube-controller-manager", 1, func(ports []int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + c.path("kube-controller-manager-certs"),
			"--leader-elect=false",
			"--controllers=" + strings.Join(c.opts.Controllers, ","),
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + c.pki.saKey,
			"--root-ca-file=" + c.pki.caCert,
			"--cluster-signing-cert-file=" + c.pki.caCert,
			"--cluster-signing-key-file=" + c.pki.caKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--profiling=false",
		}
	}, func(ctx context.Context, ports []int) error {
		if _, err := get(ctx, selfClient, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", ""); err != nil {
			return err
		}
		_, err := get(ctx, apiClient, c.url+"/api/v1/namespaces/default/serviceaccounts/default", c.tokens[AdminUser])
		return err
	}, nil)
	if err != nil {
		return err
	}
	c.ctrlMgr = p
	return nil
}

// startScheduler starts kube-scheduler with admin credentials and waits
// until it is healthy. The caller holds c.mu.
func (c *Cluster) startScheduler(ctx context.Context) error {
	kubeconfig := c.path("admin.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, c.tokens[AdminUser]); err != nil {
		return err
	}
	selfClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer selfClient.CloseIdleConnections()
	p, _, err := c.startOnFreePorts(ctx, "kube-scheduler", 1, func(ports []int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + c.path("kube-scheduler-certs"),
			"--leader-elect=false",
			"--profiling=false",
		}
	}, func(ctx context.Context, ports []int) error {
		_, err := get(ctx, selfClient, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", "")
		return err
	}, nil)
	if err != nil {
		return err
	}
	c.scheduler = p
	return nil
}

// startOnFreePorts starts the component name with args on n free loopback
// ports and waits until ready; when it could not bind a port (another process
// took it first) it runs reset, if any, and tries other ports.
func (c *Cluster) startOnFreePorts(ctx context.Context, name string, n int,
	args func(ports []int) []string, ready func(ctx context.Context, ports []int) error, reset func() error,
) (*childproc.Process, []int, error) {
	for attempt := 1; ; attempt++ {
		ports, err := FreePorts(n)
		if err != nil {
			return nil, nil, err
		}
		p, err := childproc.Start(name, c.bins[name], args(ports), c.logPath(name))
		if err != nil {
			return nil, nil, err
		}
		err = c.waitReady(ctx, p, func(ctx context.Context) error { return ready(ctx, ports) })
		if err == nil {
			return p, ports, nil
		}
		if stopErr := p.Stop(termGrace); stopErr != nil {
			return nil, nil, errors.Join(err, stopErr)
		}
		if attempt == portAttempts || !p.LogContains("address already in use") {
			return nil, nil, err
		}
		if reset != nil {
			if err := reset(); err != nil {
				return nil, nil, err
			}
		}
	}
}

// waitReady polls check until it succeeds, the process exits, ctx ends or
// Options.ReadyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *childproc.Process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return p.ExitError()
		case <-ctx.Done():
			return fmt.Errorf("%s (pid %d) not ready: %w (last check: %v); last lines of %s:\n%s",
				p.Name, p.PID(), ctx.Err(), err, p.LogPath, childproc.Tail(p.LogPath, 30))
		case <-tick.C:
		}
	}
}

// httpClient returns a client that trusts the cluster CA.
func (c *Cluster) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.pki.caPEM) {
		return nil, errors.New("parse cluster CA certificate")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, nil
}

// get fetches url (with a bearer token, if any) and returns the body of a 200
// answer; any other answer is an error.
func get(ctx context.Context, client *http.Client, url, token string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// FreePorts returns n distinct loopback ports that were free a moment ago,
// for the test components that need ports of their own (the kubelet, evictd).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
