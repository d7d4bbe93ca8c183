package dispatch_test

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
)

// reporterScript reports on its control channel: progress, three export
// items, a line that is not JSON, a text over the ledger's cap, and an
// item that names its run and trace from its environment; then answers.
const reporterScript = `#!/bin/sh
cat >/dev/null
big=$(head -c 300000 /dev/zero | tr '\0' a)
{
	printf '%s\n' '{"progress":0.2,"message":"starting"}'
	printf '%s\n' '{"export":{"type":"text","text":"first","description":"one"}}'
	printf '%s\n' 'not json'
	printf '%s\n' '{"progress":0.6,"stage":"middle"}'
	printf '{"export":{"type":"text","text":"%s"}}\n' "$big"
	printf '%s\n' '{"export":{"type":"url","url":"https://example.com/2"}}'
	printf '{"export":{"type":"text","text":"run=%s trace=%s"}}\n' "$DUCTILE_RUN_ID" "${DUCTILE_TRACE_ID-}"
} >&3
printf '%s\n' '{"status":"ok","result":"reported"}'
`

// TestWhatAPluginReportsIsRecordedBeforeItsOutcome: progress and export
// items written on the control channel reach the job's stream, the items
// in order and durable before the outcome, whose result_refs name them; a
// refused line and an item over a cap are logged with the job's id and
// counted, and the job succeeds all the same.
func TestWhatAPluginReportsIsRecordedBeforeItsOutcome(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := setupWith(t, 1, nil, daemon.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	enq := commands.JobFor(b.d.Config(), "reporter", "poll", events.ActorCLI)
	enq.TraceID = "trace-7"
	res, err := commands.EnqueueJob(b.ctx, b.d.Ledger, enq)
	require.NoError(t, err)
	id := res.JobID
	b.waitFor(map[string]string{id: "succeeded"})

	evs, err := b.d.Ledger.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	var items []events.Exported
	var last *events.Progressed
	var succeeded events.AttemptEnded
	for _, ev := range evs {
		switch ev.Type {
		case events.JobExported:
			var item events.Exported
			require.NoError(t, json.Unmarshal(ev.Data, &item))
			items = append(items, item)
		case events.JobProgressed:
			last = new(events.Progressed)
			require.NoError(t, json.Unmarshal(ev.Data, last))
		case events.JobSucceeded:
			require.NoError(t, json.Unmarshal(ev.Data, &succeeded))
		}
	}
	require.Len(t, items, 3, "the text over its cap is not stored")
	require.Equal(t, events.Exported{ExportItemID: id + ":1", Attempt: 1, Type: events.ExportText, Text: "first", Description: "one", TraceID: "trace-7"}, items[0])
	require.Equal(t, events.Exported{ExportItemID: id + ":2", Attempt: 1, Type: events.ExportURL, URL: "https://example.com/2", TraceID: "trace-7"}, items[1])
	require.Equal(t, "run="+id+" trace=trace-7", items[2].Text, "the dispatcher gives the plugin its run and trace ids")
	require.Equal(t, []string{id + ":1", id + ":2", id + ":3"}, succeeded.ResultRefs)

	require.NotNil(t, last, "progress was recorded")
	require.Equal(t, 0.6, *last.Progress)
	require.Equal(t, "starting", last.Message)
	require.Equal(t, "middle", last.Stage)

	var refused, notRecorded, summary []map[string]any
	for _, rec := range logs.records(t) {
		switch rec["msg"] {
		case "plugin control line refused":
			refused = append(refused, rec)
		case "plugin export item not recorded":
			notRecorded = append(notRecorded, rec)
		case "plugin control lines refused":
			summary = append(summary, rec)
		}
	}
	require.Len(t, refused, 1)
	require.Equal(t, id, refused[0]["job_id"])
	require.Contains(t, refused[0]["reason"], `control line 3 refused: not a JSON object: "not json"`)
	require.Len(t, notRecorded, 1)
	require.Equal(t, id, notRecorded[0]["job_id"])
	require.Contains(t, notRecorded[0]["err"], "text is 300000 bytes; at most 262144")
	require.Len(t, summary, 1)
	require.Equal(t, id, summary[0]["job_id"])
	require.EqualValues(t, 1, summary[0]["refused"])
	require.EqualValues(t, 1, summary[0]["exports_not_recorded"])
}

// A job run without a daemon (RunJob) gives its plugin its trace id too.
func TestRunJobGivesThePluginItsTraceID(t *testing.T) {
	t.Parallel()
	b := setupCore(t, nil, slog.New(slog.DiscardHandler))
	enq := commands.JobFor(b.c.Config(), "reporter", "poll", events.ActorCLI)
	enq.TraceID = "trace-42"
	res, err := commands.EnqueueJob(b.ctx, b.c.Ledger, enq)
	require.NoError(t, err)
	require.NoError(t, b.c.RunJob(b.ctx, res.JobID))

	j := b.fold(res.JobID)
	require.Equal(t, events.StatusSucceeded, j.Status)
	evs, err := b.c.Ledger.ReadStream(b.ctx, events.JobStream(res.JobID))
	require.NoError(t, err)
	var texts []string
	for _, ev := range evs {
		if ev.Type == events.JobExported {
			var item events.Exported
			require.NoError(t, json.Unmarshal(ev.Data, &item))
			texts = append(texts, item.Text)
			require.Equal(t, "trace-42", item.TraceID, "an item carries its run's trace id")
		}
	}
	require.Equal(t, []string{"first", "", "run=" + res.JobID + " trace=trace-42"}, texts)
}
