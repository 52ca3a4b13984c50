package signals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCollect(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := SourceFunc(func(_ context.Context, at time.Time) ([]Observation, error) {
		return []Observation{{Signal: MemoryAvailable, Available: 1, Capacity: 2, Time: at}}, nil
	})
	failing := SourceFunc(func(context.Context, time.Time) ([]Observation, error) {
		return nil, errors.New("read memory.stat: truncated")
	})
	garbled := SourceFunc(func(_ context.Context, at time.Time) ([]Observation, error) {
		return []Observation{{Signal: PIDAvailable, Available: 5, Capacity: 0, Time: at}}, nil
	})
	obs, err := Collect(context.Background(), now, []Source{ok, failing, garbled, ok})
	if got := len(obs); got != 1 {
		t.Fatalf("observations: got %d, want 1 (memory only)", got)
	}
	if o := obs[MemoryAvailable]; o.Available != 1 || !o.Time.Equal(now) {
		t.Errorf("memory.available: got %+v, want available 1 at %s", o, now)
	}
	for _, want := range []string{"truncated", "pid.available: capacity 0 is not positive", "observed by two sources"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error: got %v, want it to mention %q", err, want)
		}
	}
}

func TestDeriveContainerFs(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := func() Observations {
		return Observations{
			NodeFsAvailable:   {Signal: NodeFsAvailable, Available: 10, Capacity: 100, Time: now},
			NodeFsInodesFree:  {Signal: NodeFsInodesFree, Available: 11, Capacity: 100, Time: now},
			ImageFsAvailable:  {Signal: ImageFsAvailable, Available: 20, Capacity: 100, Time: now},
			ImageFsInodesFree: {Signal: ImageFsInodesFree, Available: 21, Capacity: 100, Time: now},
		}
	}
	for _, tc := range []struct {
		layout           FsLayout
		wantBytes, wantI int64
	}{
		{SingleFs, 20, 21},
		{DedicatedImageFs, 20, 21},
		{SplitImageFs, 10, 11},
	} {
		t.Run(tc.layout.String(), func(t *testing.T) {
			obs := base()
			DeriveContainerFs(obs, tc.layout)
			if got := obs[ContainerFsAvailable]; got.Available != tc.wantBytes || got.Signal != ContainerFsAvailable {
				t.Errorf("containerfs.available: got %+v, want available %d", got, tc.wantBytes)
			}
			if got := obs[ContainerFsInodesFree].Available; got != tc.wantI {
				t.Errorf("containerfs.inodesFree: got %d, want %d", got, tc.wantI)
			}
		})
	}
	t.Run("no source, nothing derived", func(t *testing.T) {
		obs := Observations{}
		DeriveContainerFs(obs, SingleFs)
		if len(obs) != 0 {
			t.Errorf("got %v, want nothing", obs)
		}
	})
}
