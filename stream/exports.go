package stream

import (
	"context"
	"errors"
	"net/http"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// RunEnd is the data of a stream's end message: the run ended so.
type RunEnd struct {
	RunID  string          `json:"run_id"`
	Status views.RunStatus `json:"status"`
}

// ExportsHandler serves GET /runs/{id}/export/stream: the export channel of
// one run as Server-Sent Events, read from the ledger. Each item is "event:
// export", its id the seq of its job.exported, its data the item
// (views.ExportItem). The run is the request's path value "id", a whole
// run id (the caller resolves a short one). Without Last-Event-ID nor
// ?after= it starts at the run's first item. Once the run has ended (its
// items all sent), an "event: end" message (data RunEnd) ends the stream.
func ExportsHandler(l *ledger.Ledger, opts Options) http.Handler {
	return &exportsHandler{l: l, sse: newSSE(opts)}
}

type exportsHandler struct {
	l   *ledger.Ledger
	sse *sse
}

func (h *exportsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after, head, err := parseStart(r)
	if err != nil {
		writeUsage(w, err)
		return
	}
	if head {
		after = 0 // every item of the run
	}
	id := r.PathValue("id")
	h.sse.serveFrom(w, r, h.l, after, false, func(ctx context.Context, after int64, send func(Message) error) error {
		return followExports(ctx, h.l, id, after, send)
	})
}

// followExports sends run id's export items after seq after, then its end
// once it has ended.
func followExports(ctx context.Context, l *ledger.Ledger, id string, after int64, send func(Message) error) error {
	last := after
	each := func(ev ledger.Event) error {
		last = ev.Seq
		switch {
		case ev.Type == events.JobExported:
			item, err := views.ExportItemOf(ev)
			if err != nil {
				return err
			}
			return send(Message{ID: ev.Seq, Event: ExportEvent, Data: item})
		case endsJob[ev.Type]:
			return ledger.ErrStopFollowing
		}
		return nil
	}
	rec, err := views.ReadRunRecord(ctx, l, id)
	if err != nil {
		return err
	}
	if rec.Status.Terminal() {
		// Ended: all its items are in; they are read at once.
		evs, err := l.ReadStream(ctx, events.JobStream(id))
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Seq <= after {
				continue
			}
			if err := each(ev); errors.Is(err, ledger.ErrStopFollowing) {
				break
			} else if err != nil {
				return err
			}
		}
	} else if _, err := l.Follow(ctx, after, ledger.Filter{Stream: events.JobStream(id)}, each); err != nil {
		return err
	}
	if rec, err = views.ReadRunRecord(ctx, l, id); err != nil {
		return err
	}
	return send(Message{ID: max(last, after), Event: EndEvent, Data: RunEnd{RunID: id, Status: rec.Status}})
}
