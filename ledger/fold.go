package ledger

import (
	"slices"
	"sync/atomic"
)

// Folds: a decision reads a stream's state with Fold, and the ledger keeps
// what it folded, keyed by (stream, version), for the next decision on the
// stream. A decision's appends extend the fold it read (or, for a stream
// they create, start one): the next decision folds only those events, with
// no read of the stream, and events nobody folds again are never decoded. A cached
// fold is trusted only while its stream is at the version it was folded
// to, which one index lookup checks: versions are never reused and events
// never change, so the same version means the same events, whoever
// appended them (another process included). What a decision folded or
// appended is kept only once its events have committed, so the cache never
// describes an append that was rolled back.
//
// The cache belongs to the writer goroutine, which runs every decision and
// every commit: no lock. It is bounded in entries and in bytes; when full,
// a new fold replaces an arbitrary old one (stale ones, of streams another
// process moved on, go that way too).
//
// The look at the stream's version is skipped when the writer knows it
// already: while nothing but this writer has written to the file since its
// last commit (the writer's view, append.go), a fold cached in the current
// epoch is at its stream's version, since every commit of this writer
// caches what it appended or drops the stream's fold. A transaction that
// cannot tell (another process wrote, or an exclusive write, a failed
// batch, the first transaction) starts a new epoch: every fold is looked up
// once again, and one that is still at its stream's version joins the
// epoch. A stream an earlier decision of the same transaction appended to
// is always looked up (moved): its fold is cached only once committed.

const (
	foldMaxEntries = 4096
	foldMaxBytes   = 16 << 20
	// foldOverhead is roughly what a fold holds besides its events' data.
	foldOverhead = 256
)

// folded is a stream's state as of version: state (an S of Fold; nil:
// the zero S) with pending, the events after it, still to fold in.
type folded struct {
	version int64
	state   any
	pending []Event
	size    int    // roughly what it holds, in bytes, for the cache's bound
	epoch   uint64 // the cache's epoch when this fold was last known current
}

// stagedFold is a fold a decision leaves, cached once its events commit;
// or, with drop, a stream it appended to without folding, whose cached
// fold its commit makes stale.
type stagedFold struct {
	stream string
	drop   bool
	folded
}

type foldCache struct {
	entries map[string]folded
	bytes   int
	// epoch counts the times the writer could not tell that the file held
	// only its own writes; trusted says it can for the current transaction,
	// in which moved are the streams appended to so far.
	epoch   uint64
	trusted bool
	moved   map[string]struct{}
	// cached and read count the folds taken from the cache and those read
	// from their streams (WriteStats).
	cached, read atomic.Int64
}

// begin starts a transaction's use of the cache: trusted says whether the
// writer knows that nothing else has written since its last commit.
func (c *foldCache) begin(trusted bool) {
	if !trusted {
		c.epoch++
	}
	c.trusted = trusted
	clear(c.moved)
}

// end closes the transaction's use of the cache.
func (c *foldCache) end() {
	c.trusted = false
	clear(c.moved)
}

// touch notes that the transaction appended to stream.
func (c *foldCache) touch(stream string) {
	if !c.trusted {
		return // every version is looked up anyway
	}
	if c.moved == nil {
		c.moved = make(map[string]struct{})
	}
	c.moved[stream] = struct{}{}
}

// version is stream's version as its cached fold knows it, when the
// transaction may take it without a look (see above).
func (c *foldCache) version(stream string) (int64, bool) {
	if !c.trusted {
		return 0, false
	}
	e, ok := c.entries[stream]
	if !ok || e.epoch != c.epoch {
		return 0, false
	}
	if _, moved := c.moved[stream]; moved {
		return 0, false
	}
	return e.version, true
}

func (c *foldCache) drop(stream string) {
	if e, ok := c.entries[stream]; ok {
		c.bytes -= e.size
		delete(c.entries, stream)
	}
}

// put caches f for stream, replacing what the stream had.
func (c *foldCache) put(stream string, f folded) {
	c.drop(stream)
	if f.size > foldMaxBytes/16 {
		return
	}
	if c.entries == nil {
		c.entries = make(map[string]folded)
	}
	f.epoch = c.epoch
	for other := range c.entries {
		if len(c.entries) < foldMaxEntries && c.bytes+f.size <= foldMaxBytes {
			break
		}
		c.drop(other) // map order: an arbitrary one
	}
	c.entries[stream] = f
	c.bytes += f.size
}

// keep caches the folds of a committed decision, in the order left, and
// drops those its appends made stale.
func (c *foldCache) keep(staged []stagedFold) {
	for _, s := range staged {
		if s.drop {
			c.drop(s.stream)
			continue
		}
		c.put(s.stream, s.folded)
	}
}

// clear empties the cache (an archive may forget streams' versions).
func (c *foldCache) clear() { c.entries, c.bytes = nil, 0 }

// Fold returns the stream's state inside a decision: apply given each of
// the stream's events in turn, oldest first, starting from the zero S (a
// stream with no events folds to the zero S). It takes the fold the ledger
// cached for the stream at its current version, folding in only the events
// appended since by this ledger's decisions, else reads the stream.
//
// The state is copied by assignment, so apply must leave alone what an
// earlier state shares with it (append to a slice only through
// slices.Clip), and one stream is folded into one type S.
func Fold[S any](tx *Tx, stream string, apply func(*S, Event) error) (S, error) {
	var s S
	version, err := tx.StreamVersion(stream)
	if err != nil {
		return s, err
	}
	c := tx.folds
	if e, ok := c.entries[stream]; ok && e.version == version {
		if st, isS := e.state.(S); isS || e.state == nil {
			if isS {
				s = st
			}
			state := e.state
			if len(e.pending) > 0 {
				for _, ev := range e.pending {
					if err := apply(&s, ev); err != nil {
						return s, err
					}
				}
				// Committed events, folded: cached at once (boxed once
				// for the cache and the decision).
				state = s
				c.put(stream, folded{version: version, state: state, size: e.size})
			} else if e.epoch != c.epoch {
				// Looked up and still current: it joins the epoch.
				e.epoch = c.epoch
				c.entries[stream] = e
			}
			tx.folded(stream, folded{version: version, state: state, size: e.size}, false)
			c.cached.Add(1)
			return s, nil
		}
	}
	evs, err := tx.ReadStream(stream)
	if err != nil {
		return s, err
	}
	size := foldOverhead
	for _, ev := range evs {
		if err := apply(&s, ev); err != nil {
			return s, err
		}
		size += len(ev.Data) + len(ev.Meta)
	}
	tx.folded(stream, folded{version: version, state: s, size: size}, true)
	c.read.Add(1)
	return s, nil
}

// folded notes that the decision read stream's state f (read: from its
// events, so that it is cached once the decision commits).
func (tx *Tx) folded(stream string, f folded, read bool) {
	for i := range tx.loaded {
		if tx.loaded[i].stream == stream {
			tx.loaded[i] = loadedFold{stream: stream, folded: f, read: read}
			return
		}
	}
	tx.loaded = append(tx.loaded, loadedFold{stream: stream, folded: f, read: read})
}

// loadedFold is a state a decision read with Fold.
type loadedFold struct {
	stream string
	folded
	read bool // folded from the stream's events, not the cache
}

// stage leaves, for the cache, the folds the decision read from their
// streams and, for each stream it appended to (stored, in order), the fold
// it read extended with those events, or for a stream they start, the
// events alone.
func (tx *Tx) stage(stored []Event) []stagedFold {
	groups := byStream(stored)
	var staged []stagedFold
	for _, l := range tx.loaded {
		if l.read && !slices.ContainsFunc(groups, func(g streamEvents) bool { return g.stream == l.stream }) {
			staged = append(staged, stagedFold{stream: l.stream, folded: l.folded})
		}
	}
	for _, g := range groups {
		first, last := g.evs[0].Version, g.evs[len(g.evs)-1].Version
		f := folded{version: last, pending: g.evs, size: foldOverhead}
		if i := slices.IndexFunc(tx.loaded, func(l loadedFold) bool { return l.stream == g.stream }); i >= 0 && tx.loaded[i].version == first-1 {
			f.state, f.size = tx.loaded[i].state, tx.loaded[i].size
		} else if first != 1 {
			// Neither read nor started by this decision: a fold cached
			// for the stream falls behind.
			staged = append(staged, stagedFold{stream: g.stream, drop: true})
			continue
		}
		for _, ev := range g.evs {
			f.size += len(ev.Data) + len(ev.Meta)
		}
		staged = append(staged, stagedFold{stream: g.stream, folded: f})
	}
	return staged
}

// streamEvents are the events of one stream among a decision's.
type streamEvents struct {
	stream string
	evs    []Event
}

// byStream groups evs by stream, in the order each stream first appears:
// by looking each one up in order for the few a decision usually appends,
// through a map for more.
func byStream(evs []Event) []streamEvents {
	var groups []streamEvents
	var index map[string]int
	if len(evs) > 16 {
		index = make(map[string]int, len(evs))
	}
	for _, ev := range evs {
		i, ok := -1, false
		if index != nil {
			i, ok = index[ev.Stream]
		} else {
			i = slices.IndexFunc(groups, func(g streamEvents) bool { return g.stream == ev.Stream })
			ok = i >= 0
		}
		if !ok {
			i = len(groups)
			groups = append(groups, streamEvents{stream: ev.Stream})
			if index != nil {
				index[ev.Stream] = i
			}
		}
		groups[i].evs = append(groups[i].evs, ev)
	}
	return groups
}
