package systemd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Every function here is a no-op returning nil when NOTIFY_SOCKET is unset:
// evictd run by hand, in a test, or under a unit that is not Type=notify.

// Ready tells systemd that evictd has started (READY=1); with Type=notify,
// `systemctl start` returns and units ordered after evictd start only then.
func Ready() error { return notify(daemon.SdNotifyReady) }

// Stopping tells systemd that evictd is shutting down (STOPPING=1).
func Stopping() error { return notify(daemon.SdNotifyStopping) }

// Status sets the one-line status `systemctl status evictd` shows. Line
// breaks would end the STATUS= assignment early, so they become spaces.
func Status(msg string) error {
	msg = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg)
	return notify("STATUS=" + msg)
}

func notify(state string) error {
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("notify systemd %s: %w", firstLine(state), err)
	}
	return nil
}

// firstLine keeps an error message short when state is long.
func firstLine(state string) string {
	const limit = 64
	for i := range state { // on rune boundaries
		if i >= limit {
			return state[:i] + "…"
		}
	}
	return state
}

// Watchdog keeps systemd's watchdog (WatchdogSec= in the unit) fed until ctx
// is done: it sends WATCHDOG=1 at once and then every half interval, but only
// while alive() reports true. alive should say whether the loop has
// completed a pass recently (for example within a few housekeeping
// intervals); when the loop is stuck the pings stop, systemd sees the
// watchdog expire, kills evictd and, with Restart=always, starts it again.
// A nil alive means the process being scheduled is proof enough of life.
//
// Watchdog returns nil at once when no watchdog is configured for this
// process (WATCHDOG_USEC unset, or WATCHDOG_PID naming another process) or
// NOTIFY_SOCKET is unset, and an error only if the watchdog settings are
// malformed. Failed pings are logged, not returned: giving up would make
// systemd restart evictd for a transient socket error, while a lasting one
// ends in the same restart anyway when the watchdog expires.
func Watchdog(ctx context.Context, alive func() bool, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return fmt.Errorf("read systemd watchdog settings (WATCHDOG_USEC, WATCHDOG_PID): %w", err)
	}
	if interval <= 0 || !notifySocketSet() {
		return nil
	}
	period := interval / 2
	log = log.With("component", "watchdog")
	log.Info("feeding the systemd watchdog", "timeout", interval, "every", period)

	ticker := time.NewTicker(period)
	defer ticker.Stop()
	// withheld: the last check found the loop not alive; seen: it was alive
	// once, so not being alive now means stuck rather than still starting.
	withheld, seen := false, false
	for {
		switch {
		case alive == nil || alive():
			if withheld && seen {
				log.Info("loop alive again; resuming watchdog pings")
			}
			withheld, seen = false, true
			if err := notify(daemon.SdNotifyWatchdog); err != nil {
				log.Warn("watchdog ping failed", "err", err)
			}
		case !withheld && !seen:
			log.Info("waiting for the loop's first pass before feeding the watchdog", "timeout", interval)
			withheld = true
		case !withheld:
			log.Error("loop not alive; withholding watchdog pings so systemd restarts evictd", "timeout", interval)
			withheld = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// notifySocketSet reports whether systemd gave evictd a socket to notify.
func notifySocketSet() bool { return os.Getenv("NOTIFY_SOCKET") != "" }
