package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/systemd"
)

// agent runs evictd until SIGINT or SIGTERM: exit code 0 when stopped,
// 1 when it cannot start or one of its parts fails, 2 on a usage error.
func agent(args []string, stdout, stderr io.Writer) int {
	refusal := stderr
	if f, ok := stderr.(*os.File); ok && systemd.IsJournalStream(f) {
		refusal = systemd.ErrorLines(stderr)
	}
	cfg, code, ok := loadConfig("evictd", usage, args, stdout, refusal, func(fs *pflag.FlagSet) {
		fs.Bool("version", false, "Print the version, commit and Go version, and exit. (default false)")
	})
	if !ok {
		return code
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	for _, note := range cfg.Notes {
		log.Info(note)
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	// Taken first, before anything could start a child that would inherit
	// the socket or LISTEN_FDS.
	passed, err := systemd.Listener()
	if err != nil {
		log.Error("cannot use the socket systemd passed", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := evictdagent.New(ctx, cfg, evictdagent.Options{Version: version, Commit: buildVersion().Commit, Log: log, Listener: passed})
	if err != nil {
		log.Error("evictd cannot start", "err", err)
		return 1
	}
	defer a.Close()
	if err := a.Run(ctx); err != nil {
		log.Error("evictd stopped", "err", err)
		return 1
	}
	log.Info("evictd stopped")
	return 0
}
