package dispatch_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// stopperScript runs until it is stopped. It first starts a child in its
// process group that writes "TERM" to the file its payload names ("mark")
// when it gets SIGTERM, then sets what it does on SIGTERM by its payload's
// "mode" (answer: {"status":"error","error":"canceled"} and exit 1; exit:
// exit 3 without a word; ignore: nothing, so only SIGKILL ends it), then
// reports progress and exports a text "partial" on its control channel,
// and writes a line to the FIFO its payload names ("ready"), if any.
const stopperScript = `#!/bin/sh
req=$(cat)
get() { printf '%s' "$req" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
mode=$(get mode); ready=$(get ready); mark=$(get mark)
up=$(mktemp -u) && mkfifo "$up" || exit 1
sh -c 'trap "echo TERM >\"\$1\"; exit 0" TERM; echo up >"$2"; while :; do sleep 1; done' sh "$mark" "$up" &
read -r _ <"$up"
rm -f "$up"
case $mode in
answer) trap 'wait; printf "%s\n" "{\"status\":\"error\",\"error\":\"canceled\"}"; exit 1' TERM ;;
exit) trap 'wait; exit 3' TERM ;;
ignore) trap '' TERM ;;
esac
printf '%s\n' '{"progress":0.5,"stage":"waiting"}' '{"export":{"type":"text","text":"partial"}}' >&3
[ -n "$ready" ] && echo ready >"$ready"
while :; do sleep 1; done
`

// stopper enqueues a stopper job in mode; ready, if set, blocks until the
// plugin has set its SIGTERM handling. mark is the file its group's child
// writes "TERM" to.
func (b *testBundle) stopper(mode string, withReady bool) (id, mark string, ready func()) {
	b.t.Helper()
	dir := b.t.TempDir()
	mark = filepath.Join(dir, "mark")
	p := map[string]string{"mode": mode, "mark": mark}
	if withReady {
		p["ready"] = filepath.Join(dir, "ready")
		require.NoError(b.t, syscall.Mkfifo(p["ready"], 0o600))
	}
	payload, _ := json.Marshal(p)
	enq := commands.JobFor(b.c.Config(), "stopper", "poll", events.ActorCLI)
	enq.Payload = payload
	res, err := commands.EnqueueJob(b.ctx, b.c.Ledger, enq)
	require.NoError(b.t, err)
	return res.JobID, mark, func() {
		b.t.Helper()
		f, err := os.Open(p["ready"]) // blocks until the plugin opens it
		require.NoError(b.t, err)
		defer f.Close()
		_, err = f.Read(make([]byte, 16))
		require.NoError(b.t, err)
	}
}

// A running job asked to cancel is canceled, never failed, however its
// plugin ends once its process group gets SIGTERM: answering that it
// stopped on request, exiting non-zero, or ignoring SIGTERM until the
// SIGKILL after the grace period.
func TestACanceledJobEndsCanceledHoweverItsPluginStops(t *testing.T) {
	for _, mode := range []string{"answer", "exit", "ignore"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 1, nil)
			id, mark, ready := b.stopper(mode, true)
			ready()
			status, err := commands.CancelJob(b.ctx, b.d.Ledger, commands.Cancel{JobID: id, Reason: "test", Now: time.Now()})
			require.NoError(t, err)
			require.Equal(t, events.StatusCancelRequested, status)
			b.waitFor(map[string]string{id: "canceled"})

			evs, err := b.d.Ledger.ReadStream(b.ctx, events.JobStream(id))
			require.NoError(t, err)
			var types []string
			for _, ev := range evs {
				types = append(types, ev.Type)
			}
			require.NotContains(t, types, events.JobFailed, "the attempt ended canceled, not failed")
			require.Equal(t, events.JobCanceled, types[len(types)-1])
			var canceled events.Canceled
			require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &canceled))
			require.Equal(t, 1, canceled.Attempt)
			require.Equal(t, []string{id + ":1"}, canceled.ResultRefs, "the item exported before the cancel is kept, and referenced")

			got, err := os.ReadFile(mark)
			require.NoError(t, err)
			require.Equal(t, "TERM\n", string(got), "SIGTERM went to the plugin's whole process group")
		})
	}
}

// A plugin that overruns its timeout ends timed out, not canceled, even
// when it answers that it stopped on request.
func TestATimedOutJobEndsTimedOut(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, func(cfg *config.Config) {
		pc := config.DefaultPlugin()
		pc.Retry.MaxAttempts = 1
		pc.Timeouts.Poll = 300 * time.Millisecond
		cfg.Plugins = map[string]config.PluginConfig{"stopper": pc}
	})
	id, mark, _ := b.stopper("answer", false)
	b.waitFor(map[string]string{id: "dead"})
	j := b.fold(id)
	require.Contains(t, j.LastError, "timed out after 300ms")
	evs, err := b.d.Ledger.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	var kinds []string
	for _, ev := range evs {
		if ev.Type == events.JobTimedOut {
			var ended events.AttemptEnded
			require.NoError(t, json.Unmarshal(ev.Data, &ended))
			kinds = append(kinds, string(ended.Kind))
		}
	}
	require.Equal(t, []string{string(events.OutcomeTimeout)}, kinds)
	got, err := os.ReadFile(mark)
	require.NoError(t, err)
	require.Equal(t, "TERM\n", string(got), "SIGTERM went to the plugin's whole process group")
}
