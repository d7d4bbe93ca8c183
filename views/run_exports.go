package views

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ExportItem is one export item of a run (spec run-protocol.md §6.2): a
// job.exported event, with the run it belongs to and when it was made
// (epoch seconds). Binary is base64 in JSON.
type ExportItem struct {
	ExportItemID string            `json:"export_item_id"`
	RunID        string            `json:"run_id"`
	Type         events.ExportType `json:"type"`
	CreatedAt    float64           `json:"created_at"`
	Attempt      int               `json:"attempt"`
	Description  string            `json:"description,omitempty"`
	Text         string            `json:"text,omitempty"`
	URL          string            `json:"url,omitempty"`
	BinaryURL    string            `json:"binary_url,omitempty"`
	Binary       []byte            `json:"binary,omitempty"`
	MIME         string            `json:"mime,omitempty"`
	Metadata     json.RawMessage   `json:"metadata,omitempty"`
	TraceID      string            `json:"trace_id,omitempty"`
	// Seq is the seq of its event (a live stream resumes after it).
	Seq int64 `json:"seq"`
}

// ExportItemOf is the export item a job.exported event records.
func ExportItemOf(ev ledger.Event) (ExportItem, error) {
	var d events.Exported
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return ExportItem{}, fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	return ExportItem{ExportItemID: d.ExportItemID, RunID: events.JobIDFromStream(ev.Stream), Type: d.Type, CreatedAt: epoch(ev.RecordedAt),
		Attempt: d.Attempt, Description: d.Description, Text: d.Text, URL: d.URL, BinaryURL: d.BinaryURL, Binary: d.Binary,
		MIME: d.MIME, Metadata: d.Metadata, TraceID: d.TraceID, Seq: ev.Seq}, nil
}

// exportReadPage is how many job.exported events RunExports reads at once.
const exportReadPage = 256

// MaxExportPage is the most items one page of RunExports holds, and
// DefaultExportPage how many it holds when the caller gives no limit.
const (
	MaxExportPage     = 1000
	DefaultExportPage = 100
)

// ParseExportCursor reads an export cursor ("" or an item number n, or an
// export item id "<run id>:<n>"): the items after n follow.
func ParseExportCursor(after string) (int, error) {
	if after == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(after); err == nil && n >= 0 {
		return n, nil
	}
	if n := events.ExportItemNumber(after); n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("export cursor %q is not an item number or an export item id", after)
}

// RunExports reads run id's export items after the cursor after (an item
// number, "" for the first), at most limit (DefaultExportPage if 0,
// MaxExportPage at most), in order, and the cursor of the next page:
// nextAfter is "" once the last item is read. No such run is a
// *JobNotFoundError; a bad cursor an error wrapping ErrBadCursor.
func RunExports(ctx context.Context, l *ledger.Ledger, id, after string, limit int) (items []ExportItem, nextAfter string, err error) {
	from, err := ParseExportCursor(after)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	if limit <= 0 {
		limit = DefaultExportPage
	}
	limit = min(limit, MaxExportPage)
	// The k-th job.exported of the stream is item k: the first from are
	// skipped undecoded.
	items = []ExportItem{}
	more, seen, afterSeq := false, 0, int64(0)
	stream := ledger.Filter{Stream: events.JobStream(id), Type: events.JobExported}
	for !more {
		last, err := l.ReadFrom(ctx, afterSeq, exportReadPage, stream, func(ev ledger.Event) error {
			seen++
			if seen <= from || more {
				return nil
			}
			if len(items) == limit {
				more = true
				return nil
			}
			item, err := ExportItemOf(ev)
			if err != nil {
				return err
			}
			items = append(items, item)
			return nil
		})
		if err != nil {
			return nil, "", err
		}
		if last == afterSeq {
			break // read them all
		}
		afterSeq = last
	}
	if seen == 0 {
		found := false
		_, err := l.ReadFrom(ctx, 0, 1, ledger.Filter{Stream: events.JobStream(id), Type: events.JobEnqueued},
			func(ledger.Event) error { found = true; return nil })
		if err != nil {
			return nil, "", err
		}
		if !found {
			return nil, "", &JobNotFoundError{ID: id}
		}
	}
	if more {
		nextAfter = strconv.Itoa(events.ExportItemNumber(items[len(items)-1].ExportItemID))
	}
	return items, nextAfter, nil
}
