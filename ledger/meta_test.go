package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// TestAppendedEventsMetadataIsTheStoredOnes: an event the writer has just
// appended answers Metadata without decoding its meta (inline projections
// and folds of it read it so), and the answer is what decoding the stored
// meta gives, even where encoding changed the text (invalid UTF-8).
func TestAppendedEventsMetadataIsTheStoredOnes(t *testing.T) {
	var appended []ledger.Event
	b := setup(t, ledger.Options{BeforeCommit: func(evs []ledger.Event) { appended = append(appended, evs...) }})
	metas := []ledger.Meta{
		{},
		{CorrelationID: "019aff00-0000-7000-8000-000000000001", CausationID: "job/a<b>&c", Actor: "cli"},
		{CorrelationID: "bad \xff utf-8", Actor: "dispatcher"},
	}
	for i, m := range metas {
		e := ev("meta/x", int64(i), "meta.tested", map[string]int{"i": i})
		e.Meta = m
		_, err := b.l.Append(context.Background(), e)
		require.NoError(t, err)
	}
	stored, err := b.l.ReadStream(context.Background(), "meta/x")
	require.NoError(t, err)
	require.Len(t, appended, len(metas))
	var fromFile ledger.Meta
	for i := range metas {
		fromWriter, err := appended[i].Metadata()
		require.NoError(t, err)
		fromFile, err = stored[i].Metadata()
		require.NoError(t, err)
		require.Equal(t, fromFile, fromWriter, "event %d", i)
	}
	require.NotEqual(t, metas[2], fromFile, "the invalid UTF-8 meta must change in encoding, or it tests nothing")
}
