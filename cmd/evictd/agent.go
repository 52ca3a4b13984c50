package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/systemd"
)

// loadConfig parses flags into a validated configuration; ok is false when
// the caller should exit with code: after printing help (head and the
// flags) or the version on stdout, or the error on stderr.
func loadConfig(name, head string, args []string, stdout, stderr io.Writer, extra func(*pflag.FlagSet)) (cfg *config.Config, code int, ok bool) {
	fs, opts := config.NewFlagSet(name)
	fs.SetOutput(stderr)
	setUsage(fs, stdout, head)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0, false
		}
		return nil, usageError(stderr, name, err), false
	}
	if f := fs.Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Fprintln(stdout, buildVersion())
		return nil, 0, false
	}
	if fs.NArg() > 0 {
		return nil, usageError(stderr, name, fmt.Errorf("unexpected argument %q (the commands are %s)", fs.Arg(0), commandNames())), false
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, 1, false
	}
	return cfg, 0, true
}

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

// statusTimeout bounds how long `evictd status` waits for the agent.
const statusTimeout = 5 * time.Second
