package views_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// TestResolveJobIDByIDOrUniquePrefix: a job is found by its id or a unique
// prefix of at least MinPrefix characters, in any case; a shorter prefix,
// an unknown one and an ambiguous one are typed errors.
func TestResolveJobIDByIDOrUniquePrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := b.enqueue(t, "echo", 1, "abcd1111-0000-7000-8000-000000000001")
	two := b.enqueue(t, "echo", 1, "abcd1111-0000-7000-8000-000000000002")
	other := b.enqueue(t, "echo", 1, "abce2222-0000-7000-8000-000000000003")
	var many []string
	for i := range 7 {
		many = append(many, b.enqueue(t, "echo", 1, fmt.Sprintf("0000aaaa-0000-7000-8000-00000000000%d", i)))
	}

	for arg, want := range map[string]string{
		one: one, strings.ToUpper(two): two, "abce": other, "ABCE2": other, "abcd1111-0000-7000-8000-000000000002": two,
	} {
		got, err := views.ResolveJobID(b.ctx, b.l, arg)
		require.NoError(t, err, arg)
		require.Equal(t, want, got, arg)
	}

	_, err := views.ResolveJobID(b.ctx, b.l, "abcd")
	var ambiguous *views.AmbiguousIDError
	require.ErrorAs(t, err, &ambiguous)
	require.Equal(t, views.AmbiguousIDError{Kind: "job", Prefix: "abcd", Matches: []string{one, two}}, *ambiguous)
	require.EqualError(t, err, `job id "abcd" is ambiguous: it matches `+one+", "+two)

	_, err = views.ResolveJobID(b.ctx, b.l, "0000")
	require.ErrorAs(t, err, &ambiguous)
	require.Equal(t, views.AmbiguousIDError{Kind: "job", Prefix: "0000", Matches: many[:5], More: true}, *ambiguous)
	require.EqualError(t, err, `job id "0000" is ambiguous: it matches `+strings.Join(many[:5], ", ")+" and more")

	var notFound *views.JobNotFoundError
	_, err = views.ResolveJobID(b.ctx, b.l, "abc")
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, views.JobNotFoundError{ID: "abc", TooShort: true}, *notFound)
	require.EqualError(t, err, "no job abc")
	require.ErrorIs(t, err, views.ErrJobNotFound)
	require.ErrorIs(t, err, commands.ErrJobNotFound, "one sentinel for reads and writes")

	_, err = views.ResolveJobID(b.ctx, b.l, "ffffffff")
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, views.JobNotFoundError{ID: "ffffffff"}, *notFound)
}

// TestResolveByShortID: the short id the CLI prints (the random tail of a
// UUIDv7) names its job, as does a prefix of it of at least MinPrefix
// characters, in any case; a prefix shared by several, by tail or by id,
// is ambiguous and lists them; a run is found the same way, and job and run
// ids never resolve to each other.
func TestResolveByShortID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Made in the same millisecond: their ids differ only in the tail.
	one := b.enqueue(t, "echo", 1, "01a22215-ccdc-7972-ba65-d392c907dc16")
	two := b.enqueue(t, "echo", 1, "01a22215-ccdc-7a00-8b11-d392ffff0001")
	three := b.enqueue(t, "echo", 1, "01a22216-0000-7000-9000-7e5a00000003")
	four := b.enqueue(t, "echo", 1, "7e5a0000-0000-7000-9000-000000000004") // its id starts as three's tail
	run := "01a22215-ccdc-7b00-8c22-5ca1ab1e0005"
	_, err := b.l.Append(b.ctx, ledger.NewEvent{Stream: events.RunStream(run), ExpectedVersion: 0, Type: events.PipelineRunStarted, Data: json.RawMessage(`{}`)})
	require.NoError(t, err)

	require.Equal(t, "d392c907dc16", views.ShortID(one))
	require.Equal(t, "not-a-uuid", views.ShortID("not-a-uuid"))
	for arg, want := range map[string]string{
		views.ShortID(one): one, views.ShortID(two): two, "D392C907DC16": one, "d392c9": one, "d392f": two,
		views.ShortID(three): three, "7e5a000000": three, "7e5a0000-": four,
	} {
		got, err := views.ResolveJobID(b.ctx, b.l, arg)
		require.NoError(t, err, arg)
		require.Equal(t, want, got, arg)
	}

	var ambiguous *views.AmbiguousIDError
	for arg, want := range map[string][]string{
		"d392":     {one, two},        // by the tail
		"01a22215": {one, two},        // by the time
		"7e5a":     {four, three},     // by the id, then by the tail
		"01a2":     {one, two, three}, // the run is not a job
	} {
		_, err := views.ResolveJobID(b.ctx, b.l, arg)
		require.ErrorAs(t, err, &ambiguous, arg)
		require.Equal(t, views.AmbiguousIDError{Kind: "job", Prefix: arg, Matches: want}, *ambiguous, arg)
	}

	for _, arg := range []string{run, views.ShortID(run), "5CA1AB"} {
		got, err := views.ResolveRunID(b.ctx, b.l, arg)
		require.NoError(t, err, arg)
		require.Equal(t, run, got, arg)
	}
	_, err = views.ResolveRunID(b.ctx, b.l, views.ShortID(one))
	require.ErrorIs(t, err, views.ErrRunNotFound, "a job is not a run")
	_, err = views.ResolveJobID(b.ctx, b.l, views.ShortID(run))
	require.ErrorIs(t, err, views.ErrJobNotFound, "a run is not a job")
	_, err = views.ResolveRunID(b.ctx, b.l, "01a22215")
	require.NoError(t, err, "one run has that prefix")
}

// TestJobStateFoldsTheStream: a job's state is its stream folded, whether
// or not the projections have it; no stream is a *JobNotFoundError.
func TestJobStateFoldsTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 1)
	b.start(t, id)
	j, err := views.JobState(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusRunning, j.Status)

	_, err = views.JobState(b.ctx, b.l, "ffffffff")
	var notFound *views.JobNotFoundError
	require.ErrorAs(t, err, &notFound)
	require.True(t, errors.Is(err, views.ErrJobNotFound))
}
