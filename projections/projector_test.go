package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openLedger(t testing.TB, name string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), name), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// model is what the generator knows it wrote, independent of any projection.
type model struct {
	versions map[string]int64
	counts   map[string]int64
}

// generate appends n random events in random-sized batches across a skewed
// set of streams, calling between(lastSeq) after each batch.
func generate(t testing.TB, l *ledger.Ledger, rng *rand.Rand, n int, at int64, snapshotAt func(int64, model), between func()) model {
	t.Helper()
	types := []string{"job.enqueued", "job.started", "job.succeeded", "job.failed", "job.retry_scheduled",
		"plugin.fact_recorded", "plugin.state_merged", "breaker.opened", "breaker.closed", "context.created",
		"baggage.claimed", "schedule.fired", "message.published", "claim.acquired", "claim.completed"}
	m := model{versions: map[string]int64{}, counts: map[string]int64{}}
	words := []string{"alpha", "βeta", "gamma 🚀", `quote"d`, "back\\slash", "new\nline", ""}
	written := 0
	for written < n {
		size := min(1+rng.IntN(500), n-written)
		batch := make([]ledger.NewEvent, 0, size)
		for range size {
			// Skewed: a few hot streams, a long tail of cold ones.
			var stream string
			if rng.IntN(4) == 0 {
				stream = fmt.Sprintf("hot/%d", rng.IntN(10))
			} else {
				stream = fmt.Sprintf("cold/%d", rng.IntN(20000))
			}
			typ := types[rng.IntN(len(types))]
			data := map[string]any{
				"n":      rng.Int64N(1 << 40),
				"price":  json.Number(fmt.Sprintf("%d.50", rng.IntN(100))),
				"word":   words[rng.IntN(len(words))],
				"nested": map[string]any{"ok": rng.IntN(2) == 0, "list": []int{rng.IntN(9), rng.IntN(9)}},
			}
			batch = append(batch, ledger.NewEvent{Stream: stream, ExpectedVersion: m.versions[stream], Type: typ, Data: data,
				Meta: ledger.Meta{CorrelationID: fmt.Sprintf("c%d", rng.IntN(100)), Actor: "generator"}})
			m.versions[stream]++
			m.counts[typ]++
			written++
			if snapshotAt != nil && int64(written) == at {
				snapshotAt(at, model{versions: clone(m.versions), counts: clone(m.counts)})
			}
		}
		_, err := l.Append(context.Background(), batch...)
		require.NoError(t, err)
		if between != nil {
			between()
		}
	}
	return m
}

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func catchUp(t testing.TB, p *projections.Projector) {
	t.Helper()
	for {
		n, err := p.RunOnce(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
}

func dump(t testing.TB, l *ledger.Ledger) ([]byte, int64) {
	t.Helper()
	var buf bytes.Buffer
	cp, err := projections.Dump(context.Background(), l, &buf)
	require.NoError(t, err)
	return buf.Bytes(), cp
}

// TestReplayIsExact projects 100,000 random events incrementally, in odd
// batch sizes interleaved with the appends, then rebuilds from scratch: the
// canonical dumps must be byte-identical. A copy of the log as of seq 50,000
// must project exactly what the generator knows it had written by then.
func TestReplayIsExact(t *testing.T) {
	total, mid := 100_000, int64(50_000)
	if testing.Short() { // the race detector run: same test, smaller log
		total, mid = 10_000, 5_000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{BatchSize: 777})

	var atMid model
	m := generate(t, l, rng, total, mid, func(_ int64, snap model) { atMid = snap }, func() {
		for range rng.IntN(3) {
			_, err := p.RunOnce(ctx)
			require.NoError(t, err)
		}
	})
	catchUp(t, p)
	incremental, cp := dump(t, l)
	require.Equal(t, int64(total), cp)

	rebuilt, err := projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	require.Equal(t, int64(total), rebuilt)
	replayed, cp := dump(t, l)
	require.Equal(t, int64(total), cp)
	require.True(t, bytes.Equal(incremental, replayed), "replay differs from incremental projection")

	// Compare reports no mismatch against a fresh replay in another file.
	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)

	// The projections hold what the generator wrote.
	checkAgainstModel(t, l, m)

	// Time travel: a copy as of seq 50,000 projects the generator's state then.
	past := openLedger(t, "past.db")
	copied, err := projections.CopyLog(ctx, l, past, mid, nil)
	require.NoError(t, err)
	require.Equal(t, mid, copied)
	_, err = projections.Rebuild(ctx, past, 0)
	require.NoError(t, err)
	checkAgainstModel(t, past, atMid)
	res, err := past.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, mid, res.LastSeq)
}

func checkAgainstModel(t *testing.T, l *ledger.Ledger, m model) {
	t.Helper()
	out, _ := dump(t, l)
	streams, counts := map[string]int64{}, map[string]int64{}
	section := ""
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if bytes.HasPrefix(line, []byte("## ")) {
			section = string(line[3:])
			continue
		}
		var row struct {
			Stream  string
			Version int64
			Type    string
			Count   int64
		}
		require.NoError(t, json.Unmarshal(line, &row))
		switch section {
		case "streams":
			streams[row.Stream] = row.Version
		case "event_counts":
			counts[row.Type] = row.Count
		}
	}
	require.Equal(t, m.versions, streams)
	require.Equal(t, m.counts, counts)
}

func TestProjectorFollowsCommitsWithoutPolling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	defer p.Stop()

	for i := range 20 {
		seqs, err := l.Append(ctx, ledger.NewEvent{Stream: fmt.Sprintf("s/%d", i), Type: "t.happened"})
		require.NoError(t, err)
		require.NoError(t, p.WaitFor(ctx, seqs[0]))
	}

	// An append by another connection (as another process would) is picked
	// up through the file, not through this ledger's own notification.
	other, err := ledger.Open(ctx, l.Path(), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer other.Close()
	seqs, err := other.Append(ctx, ledger.NewEvent{Stream: "elsewhere", Type: "t.happened"})
	require.NoError(t, err)
	require.NoError(t, p.WaitFor(ctx, seqs[0]))

	lag, err := p.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, projections.Lag{Checkpoint: 21, Head: 21}, lag)
}

func TestCompareFindsADriftedProjection(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	generate(t, l, rand.New(rand.NewPCG(1, 2)), 2000, 0, nil, nil)
	catchUp(t, projections.New(l, projections.Options{}))

	// Given projections that drifted from the log (edited behind the
	// projector's back, as a bug or a hand edit would),
	conn, err := sqlite.OpenConn(l.Path(), sqlite.OpenReadWrite)
	require.NoError(t, err)
	script, err := os.ReadFile(filepath.Join("testdata", "drift.sql"))
	require.NoError(t, err)
	require.NoError(t, sqlitex.ExecuteScript(conn, string(script), nil))
	require.NoError(t, conn.Close())

	// when compared with a fresh replay, the first drifted row is reported.
	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.NotNil(t, mismatch)
	require.Equal(t, "streams", mismatch.Projection)
	require.Equal(t, int64(2000), mismatch.Checkpoint)
	require.Contains(t, mismatch.Live, `"Stream":"hot/3"`)
	require.Contains(t, mismatch.Replayed, `"Stream":"hot/3"`)

	// and a rebuild repairs it.
	_, err = projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	mismatch, err = projections.Compare(ctx, l, openLedger(t, "scratch2.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)
}
