package main

import (
	"fmt"
	"io"

	"github.com/evictd/evictd/internal/config"
)

// checkConfig prints the effective thresholds, or the exact error, and
// exits non-zero on error.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := loadConfig("evictd check-config", args, stderr, nil)
	if !ok {
		return code
	}
	if err := config.FormatThresholds(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "evictd check-config: %v\n", err)
		return 1
	}
	for _, note := range cfg.Notes {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	return 0
}
