package views

import (
	"context"
	"errors"
	"strings"

	"github.com/ductile/ductile/ledger"
)

// LedgerQuery selects a page of the ledger's events: those after seq
// After, of type Type and of a stream beginning with StreamPrefix (each
// filter "" for any), at most Limit of them.
type LedgerQuery struct {
	After        int64
	Type         string
	StreamPrefix string
	Limit        int
}

// LedgerScanLimit is the most events one ReadLedgerPage looks at: a
// filter that matches few events answers a short page (with Next set)
// rather than reading the whole log.
const LedgerScanLimit = 10000

// LedgerPage is a page of the ledger's events.
type LedgerPage struct {
	Events []Event `json:"events"`
	// Next is the seq to pass as after for the next page: the last event
	// looked at (which may be past the last one that matched).
	Next int64 `json:"next" doc:"Pass it as after for the next page: the last seq looked at (past the last event shown when the filters skipped some)"`
	// Head is the log's newest seq when the page was read.
	Head int64 `json:"head" doc:"The log's newest seq: the page is the last one once next reaches it"`
}

// errPageFull ends a scan once the page is full.
var errPageFull = errors.New("page full")

// ReadLedgerPage reads the events q selects, oldest first, looking at no
// more than LedgerScanLimit events.
func ReadLedgerPage(ctx context.Context, l *ledger.Ledger, q LedgerQuery) (LedgerPage, error) {
	page := LedgerPage{Events: []Event{}, Next: q.After}
	head, err := l.LastSeq(ctx)
	if err != nil {
		return page, err
	}
	page.Head = head
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	scanned := 0
	f := ledger.Filter{Type: q.Type}
	err = readAll(ctx, l, q.After, 1000, f, func(ev ledger.Event) error {
		if len(page.Events) >= limit || scanned >= LedgerScanLimit {
			return errPageFull
		}
		scanned++
		page.Next = ev.Seq
		if strings.HasPrefix(ev.Stream, q.StreamPrefix) {
			page.Events = append(page.Events, EventOf(ev))
		}
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	if q.Type != "" && err == nil && len(page.Events) < limit && scanned < LedgerScanLimit {
		page.Next = max(page.Next, head) // the type filter skipped the rest: nothing more up to the head
	}
	return page, err
}

// LedgerCheck is what CheckLedger found: the hash chain, the archives and
// the head as recorded apart from the log.
type LedgerCheck struct {
	OK       bool                  `json:"ok" doc:"The chain, the archives and the head all hold"`
	Chain    ledger.VerifyResult   `json:"chain"`
	Archives []ledger.ArchiveCheck `json:"archives"`
	Head     ledger.HeadCheck      `json:"head"`
}

// CheckLedger verifies the ledger's hash chain, its archives and its head
// (what ductile ledger verify checks before it compares the projections
// with a replay).
func CheckLedger(ctx context.Context, l *ledger.Ledger) (LedgerCheck, error) {
	var out LedgerCheck
	var err error
	if out.Chain, err = l.Verify(ctx, nil); err != nil {
		return out, err
	}
	if out.Head, err = l.CheckHead(ctx); err != nil {
		return out, err
	}
	if out.Archives, err = l.VerifyArchives(ctx); err != nil {
		return out, err
	}
	if out.Archives == nil {
		out.Archives = []ledger.ArchiveCheck{}
	}
	out.OK = out.Chain.OK && out.Head.OK()
	for _, a := range out.Archives {
		out.OK = out.OK && a.OK
	}
	return out, nil
}
