package views

import (
	"context"
	"fmt"
	"strings"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// MinPrefix is the fewest characters of a job id that ResolveJobID
// searches as a prefix.
const MinPrefix = 4

// ambiguousShown is how many of the jobs an ambiguous prefix matches an
// AmbiguousIDError names.
const ambiguousShown = 5

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

// AmbiguousIDError is a job id prefix that several jobs start with.
type AmbiguousIDError struct {
	Prefix  string
	Matches []string // the first few of them
	More    bool     // more jobs match than Matches holds
}

func (e *AmbiguousIDError) Error() string {
	more := ""
	if e.More {
		more = " and more"
	}
	return fmt.Sprintf("job id prefix %q is ambiguous: it matches %s%s", e.Prefix, strings.Join(e.Matches, ", "), more)
}

// ResolveJobID turns what a user typed for a job into its id: the id
// itself, or the one id it is a prefix of (at least MinPrefix characters,
// any case). It searches the job streams of the ledger, not a projection,
// so a job just enqueued by another process is found. It fails with a
// *JobNotFoundError or an *AmbiguousIDError.
func ResolveJobID(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	find := func(from, until string) (ids []string, err error) {
		err = l.Read(ctx, func(conn *sqlite.Conn) error {
			return queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: from, Until: until, MaxStreams: ambiguousShown + 1},
				func(stream string) error { ids = append(ids, events.JobIDFromStream(stream)); return nil })
		})
		return ids, err
	}
	candidates := []string{arg}
	if lower := strings.ToLower(arg); lower != arg {
		candidates = append(candidates, lower) // ids are lower case
	}
	for _, id := range candidates {
		stream := events.JobStream(id)
		exact, err := find(stream, stream+"\x00")
		if err != nil {
			return "", err
		}
		if len(exact) > 0 {
			return id, nil
		}
		if len(id) < MinPrefix {
			continue
		}
		ids, err := find(stream, prefixEnd(stream))
		if err != nil {
			return "", err
		}
		switch {
		case len(ids) == 1:
			return ids[0], nil
		case len(ids) > ambiguousShown:
			return "", &AmbiguousIDError{Prefix: arg, Matches: ids[:ambiguousShown], More: true}
		case len(ids) > 1:
			return "", &AmbiguousIDError{Prefix: arg, Matches: ids}
		}
	}
	return "", &JobNotFoundError{ID: arg, TooShort: len(arg) < MinPrefix}
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
