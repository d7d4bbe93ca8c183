package dispatch_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// The bundled Python example (plugins/examples/countdown, on the Python SDK)
// run by the dispatcher: it reports progress and three export items, is
// canceled mid-run, and ends canceled with its items kept as its result.
func TestTheCountdownExampleIsCanceledMidRunKeepingItsItems(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the countdown example runs on it")
	}
	b := setup(t, 1, func(cfg *config.Config) {
		cfg.PluginRoots = append(cfg.PluginRoots, filepath.Join(pluginRoot, ".bundled", "examples"))
	})
	enq := commands.JobFor(b.d.Config(), "countdown", "count", events.ActorCLI)
	enq.Payload = json.RawMessage(`{"from":100000,"interval":0.01}`)
	res, err := commands.EnqueueJob(b.ctx, b.d.Ledger, enq)
	require.NoError(t, err)
	id := res.JobID

	// Once its three items are recorded, it is canceled.
	exported := 0
	_, err = b.d.Ledger.Follow(b.ctx, 0, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
		if ev.Type == events.JobExported {
			exported++
		}
		if exported == 3 {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	require.NoError(t, err)
	_, err = commands.CancelJob(b.ctx, b.d.Ledger, commands.Cancel{JobID: id, Reason: "enough", Now: time.Now()})
	require.NoError(t, err)
	b.waitFor(map[string]string{id: "canceled"})

	evs, err := b.d.Ledger.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	var types []events.ExportType
	var progressed int
	var last events.Progressed
	for _, ev := range evs {
		switch ev.Type {
		case events.JobExported:
			var item events.Exported
			require.NoError(t, json.Unmarshal(ev.Data, &item))
			types = append(types, item.Type)
		case events.JobProgressed:
			progressed++
			require.NoError(t, json.Unmarshal(ev.Data, &last))
		case events.JobFailed:
			t.Fatalf("the attempt failed: %s", ev.Data)
		}
	}
	require.Equal(t, []events.ExportType{events.ExportText, events.ExportURL, events.ExportBinaryURL}, types)
	require.Positive(t, progressed)
	require.Equal(t, "canceled", last.Stage, "its last progress, written before the outcome, is its goodbye")
	var canceled events.Canceled
	require.Equal(t, events.JobCanceled, evs[len(evs)-1].Type)
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &canceled))
	require.Equal(t, []string{id + ":1", id + ":2", id + ":3"}, canceled.ResultRefs)
}
