package nodestatus

import "time"

// LastWritten lets the external tests see when the publisher last wrote.
func LastWritten(p *Publisher) time.Time { return p.lastWritten() }
