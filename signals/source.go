package signals

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Source reads one group of signals (for example the two of one filesystem).
// It returns the observations it could make, stamped with now, or an error
// that covers every signal it provides.
type Source interface {
	Observe(ctx context.Context, now time.Time) ([]Observation, error)
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, now time.Time) ([]Observation, error)

// Observe calls f.
func (f SourceFunc) Observe(ctx context.Context, now time.Time) ([]Observation, error) {
	return f(ctx, now)
}

// Collect asks every source once and merges what they saw. A source that
// fails, or an observation that fails Check, leaves its signals out and adds
// to the returned error; the other signals are still returned.
func Collect(ctx context.Context, now time.Time, sources []Source) (Observations, error) {
	obs := make(Observations, len(All()))
	var errs []error
	for _, src := range sources {
		got, err := src.Observe(ctx, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range got {
			if err := o.Check(); err != nil {
				errs = append(errs, err)
				continue
			}
			if _, dup := obs[o.Signal]; dup {
				errs = append(errs, fmt.Errorf("%s observed by two sources; keeping the first", o.Signal))
				continue
			}
			obs[o.Signal] = o
		}
	}
	return obs, errors.Join(errs...)
}
