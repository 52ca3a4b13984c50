package guest

import (
	"os"
	"testing"

	"github.com/evictd/evictd/internal/testing/testalloc"
)

// allocEnv makes the test binary a testalloc child holding that many MiB:
// the guest's pods' memory.
const allocEnv = "EVICTD_E2E_ALLOC_MIB"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(allocEnv); ok {
		os.Exit(testalloc.Hold(allocEnv, v, 1024))
	}
	os.Exit(m.Run())
}
