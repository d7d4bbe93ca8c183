package views

import (
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/queries"
)

// ArchiveCut lowers a proposed last archived seq so that what a decision
// reads whole stays whole: every job stream with an event at or before the
// cut ends there and its job is terminal (commands fold job streams); every
// dedupe reservation there is released there too (enqueue folds dedupe
// streams for the jobs in flight); every topic message with an event there
// has all of its events there and no claim in flight (claims fold message
// streams); every pipeline run with an event at or
// before the cut is finished there, and the compiled version a run still
// running is on stays readable (pipeline.compiled: a superseded one stays in
// the main file). Other streams keep their versions
// (ledger.ArchiveOptions.ForgetVersionsOf forgets only job and run streams,
// archived whole and never appended to again) and their newest archived event
// of each type is carried in the main file, so what reads a stream's newest
// event (a schedule's last firing, a breaker's state, a plugin's state and
// health, the applied config) reads the same after the archive: those need
// no rule here. It says why it lowered the cut, "" if it did not. It is
// commands.ArchiveLedger's Cut: the ledger runs it inside the archive's
// write transaction.
func ArchiveCut(conn *sqlite.Conn, through int64) (int64, string, error) {
	why := ""
	for through > 0 {
		lowered := false
		err := queries.ArchiveCutJobs(conn, through, func(r queries.ArchiveCutJobsRow) error {
			through, lowered = r.FirstSeq-1, true
			why = fmt.Sprintf("job %s (from seq %d) is not finished before the cut", events.JobIDFromStream(r.Stream), r.FirstSeq)
			return nil
		})
		if err != nil {
			return 0, "", err
		}
		err = queries.ArchiveCutDedupe(conn, through, func(r queries.ArchiveCutDedupeRow) error {
			through, lowered = r.Seq-1, true
			why = fmt.Sprintf("dedupe key %s (reserved at seq %d) is held by a job not finished before the cut", r.Stream, r.Seq)
			return nil
		})
		if err != nil {
			return 0, "", err
		}
		err = queries.ArchiveCutMessages(conn, through, func(r queries.ArchiveCutMessagesRow) error {
			through, lowered = r.FirstSeq-1, true
			why = fmt.Sprintf("message %s (from seq %d) has a claim in flight or events after the cut", events.MessageIDFromStream(r.Stream), r.FirstSeq)
			return nil
		})
		if err != nil {
			return 0, "", err
		}
		cut, runWhy, err := archiveCutRuns(conn, through)
		if err != nil {
			return 0, "", err
		}
		if cut < through {
			through, lowered, why = cut, true, runWhy
		}
		if !lowered {
			break
		}
	}
	return max(through, 0), why, nil
}

// archiveCutRuns lowers through below the start of every pipeline run not
// finished (the version a run is compiled from needs no care: each version
// is a stream of its own, whose one event an archive carries).
func archiveCutRuns(conn *sqlite.Conn, through int64) (int64, string, error) {
	why := ""
	lower := func(seq int64, reason string) {
		if seq-1 < through {
			through, why = seq-1, reason
		}
	}
	// A run's compiled version needs no care: each version is its own
	// stream, whose one event an archive carries (PipelineVersionStream).
	err := queries.ArchiveCutRuns(conn, func(r queries.ArchiveCutRunsRow) error {
		lower(r.StartedSeq, fmt.Sprintf("pipeline run %s (started at seq %d) is not finished before the cut", r.RunID, r.StartedSeq))
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	return through, why, nil
}
