package tokenrenew

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/secretfile"
)

// TokenRequester is what the Renewer needs of the API server: a
// kubeclient.Client.
type TokenRequester interface {
	RequestToken(context.Context, kubeclient.TokenRequest) (string, error)
}

// RenewerConfig configures a Renewer.
type RenewerConfig struct {
	// Path is the kubeconfig's tokenFile, rewritten with each new token.
	Path string
	// RenewBefore is how long before the token's expiry it is renewed;
	// 0 means once a third of its lifetime is left (RenewAt).
	RenewBefore time.Duration
	// Lifetime is the lifetime asked for each new token; 0 means the
	// current token's own (NextLifetime).
	Lifetime time.Duration
	// RetryMin and RetryMax pace the attempts after a failure: RetryMin,
	// doubling up to RetryMax. Defaults 10s and 5m.
	RetryMin, RetryMax time.Duration
	// Clock is the Renewer's time; default the real one.
	Clock clock.Clock
	// Log receives one line per renewal and per failure.
	Log *slog.Logger
	// OnRenewal, if not nil, is called after each renewal with nil and
	// after each failure with its error (a tokenFile that cannot be read
	// or renewed, a refusal, an API server away).
	OnRenewal func(error)
}

// Renewer keeps the node-bound ServiceAccount token in a kubeconfig's
// tokenFile valid: before it expires, it asks the API server for its
// successor (same ServiceAccount, Node binding and audiences) and writes
// it over the file, atomically, which client-go re-reads (about every
// minute: RestConfig). The old token stays valid until its own expiry, so
// the clients using it go on meanwhile.
type Renewer struct {
	cfg RenewerConfig
	api TokenRequester
}

// errChanged says that the tokenFile changed after it was read: someone
// else wrote a token, which is read again rather than overwritten.
var errChanged = errors.New("the tokenFile changed while its successor was requested; not overwritten")

// NewRenewer returns a Renewer of the token at cfg.Path, after checking
// that the file is a credential only evictd's user or root can read
// (secretfile.Check) and that it holds a ServiceAccount token bound to a
// Node (kubeclient.TokenClaims.NodeBound). The error says why it cannot be renewed.
func NewRenewer(cfg RenewerConfig, api TokenRequester) (*Renewer, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 10 * time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(5*time.Minute, cfg.RetryMin)
	}
	r := &Renewer{cfg: cfg, api: api}
	if _, _, err := r.read(); err != nil {
		return nil, err
	}
	return r, nil
}

// read returns the token in the file and its claims, if it is one the
// Renewer may renew.
func (r *Renewer) read() (string, kubeclient.TokenClaims, error) {
	if err := secretfile.Check("tokenFile", r.cfg.Path); err != nil {
		return "", kubeclient.TokenClaims{}, err
	}
	b, err := os.ReadFile(r.cfg.Path)
	if err != nil {
		return "", kubeclient.TokenClaims{}, fmt.Errorf("tokenFile %s: %w", r.cfg.Path, err)
	}
	tok := strings.TrimSpace(string(b))
	c, err := kubeclient.ParseToken(tok)
	if err != nil {
		return "", kubeclient.TokenClaims{}, fmt.Errorf("tokenFile %s: %w", r.cfg.Path, err)
	}
	if err := c.NodeBound(); err != nil {
		return "", kubeclient.TokenClaims{}, fmt.Errorf("tokenFile %s: the token is %w", r.cfg.Path, err)
	}
	return tok, c, nil
}

// minGap is the least time between two attempts, whatever RenewBefore
// says: a RenewBefore longer than the lifetime renews every second.
const minGap = time.Second

// maxSleep bounds a wait with nothing to do: a token written over the
// file by hand is read again within it.
const maxSleep = time.Hour

// Run renews the token each time it is due until ctx ends, then returns
// nil. A failed attempt (the file unreadable or refused, the API server
// away or refusing) is logged and retried with backoff; the token in the
// file stays as it was, and Run goes on.
func (r *Renewer) Run(ctx context.Context) error {
	failures := 0
	for {
		wait, renewed, err := r.step(ctx)
		if r.cfg.OnRenewal != nil && ctx.Err() == nil && (renewed || (err != nil && !errors.Is(err, errChanged))) {
			r.cfg.OnRenewal(err)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errChanged):
			r.cfg.Log.Info("the tokenFile was rewritten by someone else while its successor was requested; reading it again", "tokenFile", r.cfg.Path)
			wait = minGap
		case err != nil:
			wait = r.backoff(failures)
			failures++
			r.cfg.Log.Warn("cannot renew evictd's token; the one in the tokenFile is kept, retrying", "tokenFile", r.cfg.Path, "retryIn", wait, "failures", failures, "err", err)
		default:
			failures = 0
		}
		t := r.cfg.Clock.NewTimer(min(max(wait, minGap), maxSleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// backoff is the wait after the failures+1-th failure in a row.
func (r *Renewer) backoff(failures int) time.Duration {
	d := r.cfg.RetryMin
	for i := 0; i < failures && d < r.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, r.cfg.RetryMax)
}

// step renews the token if it is due and returns how long to wait before
// the next step, and whether it renewed the token.
func (r *Renewer) step(ctx context.Context) (time.Duration, bool, error) {
	tok, c, err := r.read()
	if err != nil {
		return 0, false, err
	}
	now := r.cfg.Clock.Now()
	if at := kubeclient.RenewAt(c, r.cfg.RenewBefore); at.After(now) {
		return at.Sub(now), false, nil
	}
	next, err := r.renew(ctx, tok, c)
	if err != nil {
		return 0, false, err
	}
	r.cfg.Log.Info("renewed evictd's token", "tokenFile", r.cfg.Path, "serviceAccount", c.Namespace+"/"+c.ServiceAccount,
		"node", c.Node, "expires", next.Expiry.UTC().Format(time.RFC3339), "previousExpiry", c.Expiry.UTC().Format(time.RFC3339))
	return kubeclient.RenewAt(next, r.cfg.RenewBefore).Sub(r.cfg.Clock.Now()), true, nil
}

// renew asks for the successor of tok, with claims c, checks it and
// writes it over the file.
func (r *Renewer) renew(ctx context.Context, tok string, c kubeclient.TokenClaims) (kubeclient.TokenClaims, error) {
	lifetime := kubeclient.NextLifetime(c, r.cfg.Lifetime)
	newTok, err := r.api.RequestToken(ctx, kubeclient.TokenRequest{
		Namespace: c.Namespace, ServiceAccount: c.ServiceAccount, Audiences: c.Audiences,
		Lifetime: lifetime, Node: c.Node, NodeUID: c.NodeUID,
	})
	if err != nil {
		return kubeclient.TokenClaims{}, err
	}
	next, err := kubeclient.ParseToken(newTok)
	if err != nil {
		return kubeclient.TokenClaims{}, fmt.Errorf("the API server's new token: %w", err)
	}
	if next.Namespace != c.Namespace || next.ServiceAccount != c.ServiceAccount || next.Node != c.Node || next.NodeUID != c.NodeUID || next.Pod != "" || next.Secret != "" {
		return kubeclient.TokenClaims{}, fmt.Errorf("the API server's new token is of serviceaccount %s/%s bound to node %q (uid %q), pod %q, secret %q; want serviceaccount %s/%s bound to node %s (uid %s) alone",
			next.Namespace, next.ServiceAccount, next.Node, next.NodeUID, next.Pod, next.Secret, c.Namespace, c.ServiceAccount, c.Node, c.NodeUID)
	}
	if !next.Expiry.After(c.Expiry) {
		return kubeclient.TokenClaims{}, fmt.Errorf("the API server's new token expires at %s, no later than the current one (%s)",
			next.Expiry.UTC().Format(time.RFC3339), c.Expiry.UTC().Format(time.RFC3339))
	}
	if err := replaceToken(r.cfg.Path, tok, newTok); err != nil {
		return kubeclient.TokenClaims{}, err
	}
	return next, nil
}

// replaceToken writes tok over the token file at path if it still holds
// old: a new file in the same directory, mode 0600, synced, renamed over
// it (the file a symbolic link points to, if path is one), and the
// directory synced, so that a reader sees the old token or the new one,
// never part of one, and a crash leaves one of them.
func replaceToken(path, old, tok string) (err error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("tokenFile %s: %w", path, err)
	}
	if err := secretfile.Check("tokenFile", real); err != nil {
		return err
	}
	cur, err := os.ReadFile(real)
	if err != nil {
		return fmt.Errorf("tokenFile %s: %w", path, err)
	}
	if !bytes.Equal(bytes.TrimSpace(cur), []byte(old)) {
		return errChanged
	}
	dir := filepath.Dir(real)
	f, err := os.CreateTemp(dir, "."+filepath.Base(real)+".new-*")
	if err != nil {
		return fmt.Errorf("tokenFile %s: write the new token: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("tokenFile %s: write the new token: %w", path, err)
	}
	if _, err = f.WriteString(tok + "\n"); err != nil {
		return fmt.Errorf("tokenFile %s: write the new token: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("tokenFile %s: write the new token: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("tokenFile %s: write the new token: %w", path, err)
	}
	if err = os.Rename(f.Name(), real); err != nil {
		return fmt.Errorf("tokenFile %s: replace it with the new token: %w", path, err)
	}
	// The rename is done; a failed sync of the directory only weakens
	// what survives a crash.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
