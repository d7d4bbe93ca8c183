package views

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// MinPrefix is the fewest characters of an id, or of a short id, that
// ResolveJobID and ResolveRunID search as a prefix.
const MinPrefix = 4

// ShortLen is the length of a short id (ShortID).
const ShortLen = 12

// ambiguousShown is how many of the ids an ambiguous argument matches an
// AmbiguousIDError names.
const ambiguousShown = 5

// ShortID is the short form of a job or run id, what the CLI prints in its
// tables: the last group of the UUIDv7, 12 hex digits drawn at random.
// (Its leading characters are the time it was made, the same for every id
// of the same minute, so a prefix of an id is rarely unique.) An id not
// shaped like a UUID is its own short form.
func ShortID(id string) string {
	if len(id) == 36 && id[23] == '-' {
		return id[24:]
	}
	return id
}

// ErrJobNotFound means no job has the id asked for. It is
// commands.ErrJobNotFound: reads and writes say it with one sentinel.
var ErrJobNotFound = commands.ErrJobNotFound

// JobNotFoundError says which job id, or prefix, found no job.
type JobNotFoundError struct {
	ID string
	// TooShort means ID is shorter than MinPrefix, so it was looked up
	// only as a whole id, not as a prefix.
	TooShort bool
}

func (e *JobNotFoundError) Error() string { return "no job " + e.ID }

func (e *JobNotFoundError) Unwrap() error { return ErrJobNotFound }

// AmbiguousIDError is an argument that names several jobs (or runs): a
// prefix of their ids or of their short ids.
type AmbiguousIDError struct {
	Kind    string // job | run
	Prefix  string
	Matches []string // the first few of them
	More    bool     // more match than Matches holds
}

func (e *AmbiguousIDError) Error() string {
	more := ""
	if e.More {
		more = " and more"
	}
	return fmt.Sprintf("%s id %q is ambiguous: it matches %s%s", e.Kind, e.Prefix, strings.Join(e.Matches, ", "), more)
}

// ResolveJobID turns what a user typed for a job into its id: the id
// itself, or the one job whose id, or short id (ShortID), it is a prefix
// of (at least MinPrefix characters, any case). It searches the job streams
// of the ledger, not a projection, so a job just enqueued by another
// process is found, and reads only the streams it matches (through
// UNIQUE (stream, version) and events_stream_tail). It fails with a
// *JobNotFoundError or an *AmbiguousIDError.
func ResolveJobID(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	return resolveID(ctx, l, "job", events.JobStream(""), arg, &JobNotFoundError{ID: arg, TooShort: len(arg) < MinPrefix})
}

// ResolveRunID is ResolveJobID for a pipeline run: no such run is
// ErrRunNotFound.
func ResolveRunID(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	return resolveID(ctx, l, "run", events.RunStream(""), arg, fmt.Errorf("%w: %s", ErrRunNotFound, arg))
}

// resolveID finds the id of a noun (job, run) that arg names among the
// streams kind + id: the one whose id or short id it is, or is a prefix of.
// Several are an *AmbiguousIDError naming the first few; none is notFound.
func resolveID(ctx context.Context, l *ledger.Ledger, noun, kind, arg string, notFound error) (string, error) {
	ids, err := findIDs(ctx, l, kind, arg)
	switch {
	case err != nil:
		return "", err
	case len(ids) == 1:
		return ids[0], nil
	case len(ids) > ambiguousShown:
		return "", &AmbiguousIDError{Kind: noun, Prefix: arg, Matches: ids[:ambiguousShown], More: true}
	case len(ids) > 1:
		return "", &AmbiguousIDError{Kind: noun, Prefix: arg, Matches: ids}
	}
	return "", notFound
}

// findIDs finds what arg names among the streams kind + id: the id of the
// one stream it names, or else the first few (up to ambiguousShown + 1) it
// is a prefix of, by id or short id.
func findIDs(ctx context.Context, l *ledger.Ledger, kind, arg string) ([]string, error) {
	candidates := []string{arg}
	if lower := strings.ToLower(arg); lower != arg {
		candidates = append(candidates, lower) // ids are lower case
	}
	var ids []string
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		add := func(stream string) error {
			if id := strings.TrimPrefix(stream, kind); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			return nil
		}
		for _, id := range candidates {
			stream := kind + id
			if err := queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: stream, Until: stream + "\x00", MaxStreams: 1}, add); err != nil {
				return err
			}
			if len(ids) > 0 {
				return nil // the whole id
			}
		}
		for _, id := range candidates {
			if len(id) < MinPrefix {
				continue
			}
			stream := kind + id
			if err := queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: stream, Until: prefixEnd(stream), MaxStreams: ambiguousShown + 1}, add); err != nil {
				return err
			}
			if len(id) > ShortLen || strings.Contains(id, "-") {
				continue // not a short id
			}
			if err := queries.FindStreamsByTail(conn, queries.FindStreamsByTailParams{TailFrom: id, TailUntil: prefixEnd(id), Kind: kind, MaxStreams: ambiguousShown + 1}, add); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resolve id: %w", err)
	}
	return ids, nil
}

// prefixEnd is the least string greater than every string that starts with
// prefix (byte order, as SQLite compares text).
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "\xff\xff\xff\xff" // nothing above: every stream name is valid UTF-8
	}
	b[len(b)-1]++
	return string(b)
}

// JobState reads job id's state from its stream, the source of truth (not
// a projection, so a job just enqueued by another process is there): what
// a front end checks before a cancel or a retry. No such job is a
// *JobNotFoundError.
func JobState(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, &JobNotFoundError{ID: id}
	}
	return commands.FoldJob(evs)
}

// RunnerPID is the id of the process that started job id's last attempt
// (a daemon, or a plugin run without one: job.started's pid); 0 if the job
// never started or its start does not say.
func RunnerPID(ctx context.Context, l *ledger.Ledger, id string) (int, error) {
	ev, ok, err := lastOfType(ctx, l, events.JobStream(id), events.JobStarted)
	if err != nil || !ok {
		return 0, err
	}
	var started events.Started
	if err := json.Unmarshal(ev.Data, &started); err != nil {
		return 0, fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	return started.PID, nil
}
