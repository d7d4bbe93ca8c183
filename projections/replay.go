package projections

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ductile/ductile/ledger"
)

// CopyLog copies src's events up to until (0: all) into dst, which must be
// empty, verifying the hash chain as it goes. progress, if set, is called
// after every page with the last seq copied.
func CopyLog(ctx context.Context, src, dst *ledger.Ledger, until int64, progress func(seq int64)) (int64, error) {
	if n, err := dst.LastSeq(ctx); err != nil {
		return 0, err
	} else if n != 0 {
		return 0, fmt.Errorf("copy log: %s already holds %d events", dst.Path(), n)
	}
	if until <= 0 {
		var err error
		if until, err = src.LastSeq(ctx); err != nil {
			return 0, err
		}
	}
	const page = 4096
	var after int64
	for after < until {
		batch := make([]ledger.Event, 0, page)
		// The archived events first, from their files (ledger/archive.go).
		last, err := src.ReadLogFrom(ctx, after, int(min(page, until-after)), func(ev ledger.Event) error {
			batch = append(batch, ev)
			return nil
		})
		if err != nil {
			return after, err
		}
		if len(batch) == 0 {
			break
		}
		if err := dst.Import(ctx, batch); err != nil {
			return after, fmt.Errorf("copy log: %w", err)
		}
		after = last
		if progress != nil {
			progress(after)
		}
	}
	return after, nil
}

// Mismatch describes the first difference between live projections and a
// fresh replay of the same log.
type Mismatch struct {
	Checkpoint int64  `json:"checkpoint"`
	Projection string `json:"projection"`
	Line       int    `json:"line"`
	Live       string `json:"live"`
	Replayed   string `json:"replayed"`
}

// Compare replays src's log, up to the checkpoint its projections are at,
// into scratch (an empty ledger) and compares the two canonical dumps. It
// returns nil when they are byte-identical.
func Compare(ctx context.Context, src, scratch *ledger.Ledger, progress func(seq int64), ps ...Projection) (*Mismatch, error) {
	var live bytes.Buffer
	cp, err := Dump(ctx, src, &live, ps...)
	if err != nil {
		return nil, err
	}
	if cp > 0 {
		if _, err := CopyLog(ctx, src, scratch, cp, progress); err != nil {
			return nil, err
		}
		if _, err := Rebuild(ctx, scratch, cp, ps...); err != nil {
			return nil, err
		}
	}
	var fresh bytes.Buffer
	if _, err := Dump(ctx, scratch, &fresh, ps...); err != nil {
		return nil, err
	}
	return diffDumps(cp, live.Bytes(), fresh.Bytes()), nil
}

func diffDumps(cp int64, live, fresh []byte) *Mismatch {
	if bytes.Equal(live, fresh) {
		return nil
	}
	a, b := bytes.Split(live, []byte("\n")), bytes.Split(fresh, []byte("\n"))
	section := ""
	for i := 0; i < max(len(a), len(b)); i++ {
		var la, lb []byte
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if bytes.HasPrefix(la, []byte("## ")) {
			section = string(la[3:])
		}
		if !bytes.Equal(la, lb) {
			return &Mismatch{Checkpoint: cp, Projection: section, Line: i + 1, Live: string(la), Replayed: string(lb)}
		}
	}
	return &Mismatch{Checkpoint: cp}
}
