package views_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
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
	require.Equal(t, views.AmbiguousIDError{Prefix: "abcd", Matches: []string{one, two}}, *ambiguous)
	require.EqualError(t, err, `job id prefix "abcd" is ambiguous: it matches `+one+", "+two)

	_, err = views.ResolveJobID(b.ctx, b.l, "0000")
	require.ErrorAs(t, err, &ambiguous)
	require.Equal(t, views.AmbiguousIDError{Prefix: "0000", Matches: many[:5], More: true}, *ambiguous)
	require.EqualError(t, err, `job id prefix "0000" is ambiguous: it matches `+strings.Join(many[:5], ", ")+" and more")

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
