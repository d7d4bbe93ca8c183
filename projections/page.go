package projections

import (
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// A page is a run of consecutive events applied together (by Rebuild, the
// catch-up goroutine and the inline projection), with each event's data
// decoded at most once whichever projections read it.
type page struct {
	events []ledger.Event
	data   []any // decoded data by index, nil until decoded
}

func newPage(evs []ledger.Event) *page {
	return &page{events: evs, data: make([]any, len(evs))}
}

// decode returns event i's data decoded into the events type its type
// names (a pointer), or nil for a type no projection reads.
func (pg *page) decode(i int) (any, error) {
	if d := pg.data[i]; d != nil {
		return d, nil
	}
	ev := pg.events[i]
	var d any
	switch ev.Type {
	case events.JobEnqueued:
		d = new(events.Enqueued)
	case events.JobStarted:
		d = new(events.Started)
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		d = new(events.AttemptEnded)
	case events.JobRetryScheduled:
		d = new(events.RetryScheduled)
	case events.JobDead:
		d = new(events.Dead)
	case events.JobRecovered:
		d = new(events.Recovered)
	case events.JobCancelRequested, events.JobCanceled:
		d = new(events.Canceled)
	case events.JobProgressed:
		d = new(events.Progressed)
	case events.PluginFactRecorded:
		d = new(events.FactRecorded)
	case events.PluginStateMerged:
		d = new(events.StateMerged)
	default:
		return nil, nil
	}
	if err := decodeData(ev.Data, d); err != nil {
		return nil, err
	}
	pg.data[i] = d
	return d, nil
}

// A pageProjection applies a whole page at once, on its one apply path
// (its Apply is a page of one): what the page holds of a row that the page
// itself creates is folded in memory and the row written once, complete,
// instead of inserted and then updated event by event; the events of other
// rows update the table. So a page's result is the same whatever its
// size (TestReplayIsExact compares pages of several sizes with a rebuild).
type pageProjection interface {
	applyPage(conn *sqlite.Conn, pg *page) error
}

// applyPage applies pg to every projection of ps, each over the whole page
// in turn (a projection reads only its own tables and the events, so the
// order across projections does not matter; job_log copies a job's fixed
// columns from job_queue, which is applied first).
func applyPage(conn *sqlite.Conn, ps []Projection, pg *page) error {
	for _, pr := range ps {
		if pp, ok := pr.(pageProjection); ok {
			if err := pp.applyPage(conn, pg); err != nil {
				return fmt.Errorf("projection %s: %w", pr.Name(), err)
			}
			continue
		}
		for _, ev := range pg.events {
			if err := pr.Apply(conn, ev); err != nil {
				return fmt.Errorf("projection %s: apply event %d (%s): %w", pr.Name(), ev.Seq, ev.Type, err)
			}
		}
	}
	return nil
}

// pendingRows are rows a page created and has not written yet, in the order
// they were created, by key.
type pendingRows[K comparable, R any] struct {
	byKey map[K]*R
	order []K
}

func (p *pendingRows[K, R]) add(k K, r *R) {
	if p.byKey == nil {
		p.byKey = map[K]*R{}
	}
	p.byKey[k] = r
	p.order = append(p.order, k)
}

// flush writes the rows still pending, in the order they were created.
func (p *pendingRows[K, R]) flush(write func(*R) error) error {
	for _, k := range p.order {
		if r, ok := p.byKey[k]; ok {
			if err := write(r); err != nil {
				return err
			}
			delete(p.byKey, k)
		}
	}
	p.order = p.order[:0]
	return nil
}

// flushOne writes the row of k now, if it is pending.
func (p *pendingRows[K, R]) flushOne(k K, write func(*R) error) error {
	r, ok := p.byKey[k]
	if !ok {
		return nil
	}
	delete(p.byKey, k)
	return write(r)
}
