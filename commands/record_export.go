package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// The caps of one export item (docs/runs.md): a larger output is refused
// whole (nothing is stored) and belongs behind a URL.
const (
	// MaxExportText caps a text item's text.
	MaxExportText = 256 << 10
	// MaxExportBinary caps an inline binary item's bytes (decoded).
	MaxExportBinary = 64 << 10
	// MaxExportMetadata caps an item's metadata (a JSON object, as given).
	MaxExportMetadata = 16 << 10
	// MaxExportURL caps a url or binary_url item's URL.
	MaxExportURL = 8 << 10
	// MaxExportDescription caps an item's description, and MaxExportMIME
	// its MIME type.
	MaxExportDescription = 8 << 10
	MaxExportMIME        = 255
)

// ErrInvalidExport means an export item was refused: a wrong type, a
// missing or misplaced field, or a field over its cap.
var ErrInvalidExport = errors.New("invalid export item")

// ExportError says what is wrong with an export item.
type ExportError struct{ Reason string }

func (e *ExportError) Error() string { return "export item refused: " + e.Reason }

// Unwrap makes it an ErrInvalidExport.
func (e *ExportError) Unwrap() error { return ErrInvalidExport }

// CheckExport refuses an item that is not one of the four types with its
// one field, or is over a cap, with an *ExportError.
func CheckExport(item events.Exported) error {
	refuse := func(format string, a ...any) error { return &ExportError{Reason: fmt.Sprintf(format, a...)} }
	has := map[string]bool{"text": item.Text != "", "url": item.URL != "", "binary_url": item.BinaryURL != "", "binary": item.Binary != nil}
	var field string
	switch item.Type {
	case events.ExportText:
		field = "text"
		if len(item.Text) > MaxExportText {
			return refuse("text is %d bytes; at most %d (export it as a url instead)", len(item.Text), MaxExportText)
		}
	case events.ExportURL:
		field = "url"
	case events.ExportBinaryURL:
		field = "binary_url"
	case events.ExportBinary:
		field = "binary"
		if len(item.Binary) > MaxExportBinary {
			return refuse("binary is %d bytes; at most %d inline (export it as a binary_url instead)", len(item.Binary), MaxExportBinary)
		}
	default:
		return refuse("type %q is not one of %v", item.Type, events.ExportTypes())
	}
	if !has[field] && item.Type != events.ExportText {
		return refuse("a %s item needs %q", item.Type, field)
	}
	for f, set := range has {
		if set && f != field {
			return refuse("a %s item has no %q (only %q)", item.Type, f, field)
		}
	}
	if n := max(len(item.URL), len(item.BinaryURL)); n > MaxExportURL {
		return refuse("url is %d bytes; at most %d", n, MaxExportURL)
	}
	if len(item.Description) > MaxExportDescription {
		return refuse("description is %d bytes; at most %d", len(item.Description), MaxExportDescription)
	}
	if len(item.MIME) > MaxExportMIME {
		return refuse("mime is %d bytes; at most %d", len(item.MIME), MaxExportMIME)
	}
	if len(item.Metadata) > 0 {
		if len(item.Metadata) > MaxExportMetadata {
			return refuse("metadata is %d bytes; at most %d", len(item.Metadata), MaxExportMetadata)
		}
		var obj map[string]json.RawMessage
		if trimmed := bytes.TrimSpace(item.Metadata); len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &obj) != nil {
			return refuse("metadata is not a JSON object")
		}
	}
	return nil
}

// Export records one export item of a running attempt (job.exported).
type Export struct {
	JobID   string
	Attempt int
	Item    events.Exported // its id and attempt are assigned
}

// RecordExport checks the item (CheckExport), numbers it (ExportItemID
// "<job id>:<n>", n from 1 among the job's items) and appends it durably:
// once it returns, the item survives a crash, so it may be announced. It
// returns the item as stored and its seq. A job that is not running that
// attempt refuses it with a *TransitionError.
func RecordExport(ctx context.Context, l *ledger.Ledger, cmd Export) (events.Exported, int64, error) {
	item := cmd.Item
	if item.Metadata != nil {
		if len(item.Metadata) == 0 || string(bytes.TrimSpace(item.Metadata)) == "null" {
			item.Metadata = nil
		}
	}
	if err := CheckExport(item); err != nil {
		return events.Exported{}, 0, fmt.Errorf("record export: %w", err)
	}
	if len(item.Metadata) > 0 {
		var err error
		if item.Metadata, err = asStored(item.Metadata); err != nil {
			return events.Exported{}, 0, fmt.Errorf("record export: %w", &ExportError{Reason: "metadata is not valid JSON"})
		}
	}
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		if err := runningAttempt(j, cmd.Attempt, "record an export item"); err != nil {
			return nil, err
		}
		item.Attempt = cmd.Attempt
		item.ExportItemID = j.JobID + ":" + strconv.Itoa(j.Exports+1)
		if item.TraceID == "" {
			item.TraceID = j.TraceID
		}
		return []ledger.NewEvent{j.next(events.JobExported, item, "", events.ActorDispatcher)}, nil
	})
	if err != nil {
		return events.Exported{}, 0, fmt.Errorf("record export: %w", err)
	}
	return item, seqs[0], nil
}
