package metrics

import "github.com/prometheus/client_golang/prometheus"

// FlightRecord is the result label of evictd_flight_records_total.
type FlightRecord string

// What became of a flight record.
const (
	RecordWritten FlightRecord = "written"
	RecordFailed  FlightRecord = "failed"
	RecordDropped FlightRecord = "dropped"
	RecordRepeat  FlightRecord = "repeat"
)

var flightRecords = []value[FlightRecord]{
	{v: RecordWritten, means: "written to the state directory (a record rewritten with its outcome counts again)"},
	{v: RecordFailed, means: "the write failed (a full or read-only disk, the directory gone); logged once until a write succeeds"},
	{v: RecordDropped, means: "not written because the writer was still busy with earlier records"},
	{v: RecordRepeat, means: "not written because it repeats the last record of the same pod, signal and result within 5 minutes (a dry run, a refused or withheld eviction)"},
}

func newFlightRecords() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evictd_flight_records_total",
		Help: "Flight records of decisions to evict, by result: " + listed(flightRecords) + ".",
	}, []string{"result"})
}

// CountFlightRecord counts a flight record with its result.
func (m *Metrics) CountFlightRecord(r FlightRecord) {
	if m == nil {
		return
	}
	m.records.WithLabelValues(string(r)).Inc()
}
