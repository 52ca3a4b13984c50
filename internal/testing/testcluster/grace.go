package testcluster

import "time"

// termGrace is how long a component gets to exit after SIGTERM.
const termGrace = 15 * time.Second
