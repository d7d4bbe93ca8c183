package commands_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// runningJob enqueues a job of maxAttempts attempts and starts its first.
func runningJob(t *testing.T, b *testBundle, maxAttempts int) string {
	t.Helper()
	res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.MaxAttempts = maxAttempts }))
	require.NoError(t, err)
	startAttempt(t, b, res.JobID)
	return res.JobID
}

func startAttempt(t *testing.T, b *testBundle, id string) {
	t.Helper()
	_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, Now: now.Add(time.Hour)}) // past any backoff
	require.NoError(t, err)
}

func reportProgress(b *testBundle, id string, attempt int, p float64, stage string) error {
	return commands.RecordProgress(b.ctx, b.l, commands.Progress{JobID: id, Attempt: attempt,
		Progress: events.Progressed{Progress: &p, Stage: stage, Lines: 3}})
}

func exportText(b *testBundle, id string, attempt int, text string) (events.Exported, error) {
	item, _, err := commands.RecordExport(b.ctx, b.l, commands.Export{JobID: id, Attempt: attempt,
		Item: events.Exported{Type: events.ExportText, Text: text}})
	return item, err
}

func endAttempt(t *testing.T, b *testBundle, id string, attempt int, out commands.Outcome) commands.CompleteResult {
	t.Helper()
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: attempt, Outcome: out, Now: now})
	require.NoError(t, err)
	return res
}

// Given a running job, when its progress is recorded, then job.progressed
// is appended with the attempt and the job's fold holds it; a report for
// another attempt, a value out of [0, 1] and a report after the job ended
// are refused, the last with a *TransitionError (a late line is dropped).
func TestRecordProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queued, err := commands.EnqueueJob(b.ctx, b.l, enqueue())
	require.NoError(t, err)
	require.ErrorIs(t, reportProgress(b, queued.JobID, 1, 0.1, ""), commands.ErrInvalidTransition, "a queued job runs no attempt")
	_, err = exportText(b, queued.JobID, 1, "early")
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	id := runningJob(t, b, 1)
	mark := b.mark(t)
	require.NoError(t, reportProgress(b, id, 1, 0.25, "fetch"))
	requireEvents(t, []want{{Stream: events.JobStream(id), Version: 3, Type: events.JobProgressed,
		Data: `{"attempt":1,"progress":0.25,"stage":"fetch","lines":3}`}}, b.since(t, mark))
	j := b.fold(t, id)
	require.Equal(t, 0.25, *j.Progress.Progress)
	require.Equal(t, "fetch", j.Progress.Stage)
	loaded, folded, _ := loadAndFold(t, b, id)
	require.Equal(t, folded, loaded)

	require.ErrorIs(t, reportProgress(b, id, 2, 0.5, ""), commands.ErrInvalidTransition, "not the running attempt")
	require.ErrorIs(t, reportProgress(b, id, 1, 1.5, ""), commands.ErrInvalidCommand, "out of range")

	endAttempt(t, b, id, 1, outOK)
	mark = b.mark(t)
	err = reportProgress(b, id, 1, 1, "")
	var te *commands.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, events.StatusSucceeded, te.Status)
	require.Empty(t, b.since(t, mark), "a terminal job is immutable")
}

// Given a running job, when export items are recorded, then each is
// numbered "<job>:<n>" from 1, stored with its attempt, durable; the fold
// counts them and lists the attempt's; an item over a cap, or malformed,
// is refused whole; a terminal job refuses them.
func TestRecordExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := runningJob(t, b, 1)
	mark := b.mark(t)
	one, err := exportText(b, id, 1, "hello")
	require.NoError(t, err)
	require.Equal(t, id+":1", one.ExportItemID)
	two, _, err := commands.RecordExport(b.ctx, b.l, commands.Export{JobID: id, Attempt: 1, Item: events.Exported{
		Type: events.ExportURL, URL: "https://example.com/r", Description: "the report", Metadata: raw(`{ "pages": 3 }`)}})
	require.NoError(t, err)
	require.Equal(t, id+":2", two.ExportItemID)
	requireEvents(t, []want{
		{Stream: events.JobStream(id), Version: 3, Type: events.JobExported,
			Data: `{"export_item_id":"` + id + `:1","attempt":1,"type":"text","text":"hello"}`},
		{Stream: events.JobStream(id), Version: 4, Type: events.JobExported,
			Data: `{"export_item_id":"` + id + `:2","attempt":1,"type":"url","url":"https://example.com/r","description":"the report","metadata":{"pages":3}}`},
	}, b.since(t, mark))
	j := b.fold(t, id)
	require.Equal(t, 2, j.Exports)
	require.Equal(t, []string{id + ":1", id + ":2"}, j.ResultRefs())

	mark = b.mark(t)
	for name, item := range map[string]events.Exported{
		"text over 256 KiB":   {Type: events.ExportText, Text: strings.Repeat("x", commands.MaxExportText+1)},
		"binary over 64 KiB":  {Type: events.ExportBinary, Binary: make([]byte, commands.MaxExportBinary+1)},
		"url over 8 KiB":      {Type: events.ExportURL, URL: "https://x/" + strings.Repeat("x", commands.MaxExportURL)},
		"metadata over 16KiB": {Type: events.ExportText, Text: "t", Metadata: raw(`{"a":"` + strings.Repeat("x", commands.MaxExportMetadata) + `"}`)},
		"metadata not object": {Type: events.ExportText, Text: "t", Metadata: raw(`[1]`)},
		"metadata not JSON":   {Type: events.ExportText, Text: "t", Metadata: raw(`{`)},
		"unknown type":        {Type: "file", Text: "t"},
		"url without url":     {Type: events.ExportURL},
		"two bodies":          {Type: events.ExportURL, URL: "https://x", Text: "t"},
	} {
		_, _, err := commands.RecordExport(b.ctx, b.l, commands.Export{JobID: id, Attempt: 1, Item: item})
		require.ErrorIs(t, err, commands.ErrInvalidExport, name)
	}
	bin, _, err := commands.RecordExport(b.ctx, b.l, commands.Export{JobID: id, Attempt: 1,
		Item: events.Exported{Type: events.ExportBinary, Binary: make([]byte, commands.MaxExportBinary), MIME: "application/octet-stream"}})
	require.NoError(t, err, "64 KiB inline is allowed")
	require.Equal(t, id+":3", bin.ExportItemID)
	require.Len(t, b.since(t, mark), 1, "refused items store nothing")

	_, err = exportText(b, id, 2, "other attempt")
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	endAttempt(t, b, id, 1, outOK)
	_, err = exportText(b, id, 1, "late")
	require.ErrorIs(t, err, commands.ErrInvalidTransition, "a terminal job refuses items")
}

// endWith is a way a running job's attempt 1 ends the job.
type endWith struct {
	name   string
	end    func(t *testing.T, b *testBundle, id string)
	status events.Status
	typ    string
}

// Every event that ends a job carries result_refs, the export items of the
// attempt that ended it, in the same append as the terminal event.
func TestResultRefsOnEveryEnd(t *testing.T) {
	t.Parallel()
	ends := []endWith{
		{"success", func(t *testing.T, b *testBundle, id string) { endAttempt(t, b, id, 1, outOK) }, events.StatusSucceeded, events.JobSucceeded},
		{"dead", func(t *testing.T, b *testBundle, id string) { endAttempt(t, b, id, 1, outFailed) }, events.StatusDead, events.JobDead},
		{"canceled by the plugin's stop", func(t *testing.T, b *testBundle, id string) {
			_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: id, Reason: "stop", Now: now})
			require.NoError(t, err)
			endAttempt(t, b, id, 1, outCanceled)
		}, events.StatusCanceled, events.JobCanceled},
		{"lost, no attempts left", func(t *testing.T, b *testBundle, id string) {
			_, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: id, Now: now})
			require.NoError(t, err)
		}, events.StatusDead, events.JobDead},
		{"lost while canceling", func(t *testing.T, b *testBundle, id string) {
			_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: id, Reason: "stop", Now: now})
			require.NoError(t, err)
			_, err = commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: id, Now: now})
			require.NoError(t, err)
		}, events.StatusCanceled, events.JobCanceled},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := runningJob(t, b, 1)
			_, err := exportText(b, id, 1, "a")
			require.NoError(t, err)
			_, err = exportText(b, id, 1, "b")
			require.NoError(t, err)
			mark := b.mark(t)
			e.end(t, b, id)
			var end []string
			for _, ev := range b.since(t, mark) {
				if ev.Type == e.typ && ev.Stream == events.JobStream(id) {
					require.JSONEq(t, `["`+id+`:1","`+id+`:2"]`, string(jsonField(t, ev.Data, "result_refs")))
					end = append(end, ev.Type)
				}
			}
			require.Len(t, end, 1)
			require.Equal(t, e.status, b.fold(t, id).Status)
			_, err = exportText(b, id, 1, "late")
			require.ErrorIs(t, err, commands.ErrInvalidTransition)
		})
	}
}

// A job whose first attempt exported items and failed, and whose second
// succeeded exporting one, ends with the second's item only; a job canceled
// while it waits for its retry ends with none.
func TestResultRefsAreTheLastAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := runningJob(t, b, 3)
	_, err := exportText(b, id, 1, "first try")
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, endAttempt(t, b, id, 1, outFailed).Status)
	require.Nil(t, b.fold(t, id).ResultRefs())
	startAttempt(t, b, id)
	_, err = exportText(b, id, 2, "second try")
	require.NoError(t, err)
	mark := b.mark(t)
	endAttempt(t, b, id, 2, outOK)
	got := b.since(t, mark)
	require.Equal(t, events.JobSucceeded, got[0].Type)
	require.JSONEq(t, `["`+id+`:2"]`, string(jsonField(t, got[0].Data, "result_refs")))

	other := runningJob(t, b, 3)
	_, err = exportText(b, other, 1, "first try")
	require.NoError(t, err)
	endAttempt(t, b, other, 1, outFailed)
	mark = b.mark(t)
	_, err = commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: other, Reason: "enough", Now: now})
	require.NoError(t, err)
	got = b.since(t, mark)
	require.Equal(t, events.JobCanceled, got[0].Type)
	require.Nil(t, jsonField(t, got[0].Data, "result_refs"), "its last attempt ended nothing: no result set")
}

// jsonField is one field of a JSON object, nil if it has none.
func jsonField(t *testing.T, data []byte, name string) json.RawMessage {
	t.Helper()
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &obj))
	return obj[name]
}
