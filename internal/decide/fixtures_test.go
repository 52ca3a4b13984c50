package decide

import "time"

const mi = int64(1) << 20

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
