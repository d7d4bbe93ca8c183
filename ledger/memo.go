package ledger

// Memos let a decision leave what it folded from a stream for the next
// decision on that stream, which then need not read and decode the stream
// again: a job's start takes the job its enqueue just built, its completion
// the job its start left. A memo is trusted only while its stream is at the
// version it was left at, which one index lookup checks: versions are never
// reused and events never change, so the same version means the same events,
// whoever appended them (another process included). A decision's memos are
// kept only once its events have committed, so a memo never describes an
// append that was rolled back.
//
// The table belongs to the writer goroutine, which runs every decision and
// every commit: no lock. It is bounded in entries and in bytes; when full, a
// new memo replaces an arbitrary old one (stale ones, of streams another
// process moved on, go that way too).

const (
	memoMaxEntries = 4096
	memoMaxBytes   = 16 << 20
)

type memo struct {
	version int64
	value   any // nil: forget the stream's memo (Forget)
	size    int
}

type memoTable struct {
	entries map[string]memo
	bytes   int
}

// stagedMemo is a memo a decision left, kept once its events commit.
type stagedMemo struct {
	stream string
	memo
}

func (t *memoTable) get(stream string) (memo, bool) {
	m, ok := t.entries[stream]
	return m, ok
}

func (t *memoTable) drop(stream string) {
	if m, ok := t.entries[stream]; ok {
		t.bytes -= m.size
		delete(t.entries, stream)
	}
}

// keep installs the memos of a committed decision, in the order left.
func (t *memoTable) keep(staged []stagedMemo) {
	for _, s := range staged {
		t.drop(s.stream)
		if s.value == nil || s.size > memoMaxBytes/16 {
			continue
		}
		if t.entries == nil {
			t.entries = make(map[string]memo)
		}
		for stream := range t.entries {
			if len(t.entries) < memoMaxEntries && t.bytes+s.size <= memoMaxBytes {
				break
			}
			t.drop(stream) // map order: an arbitrary one
		}
		t.entries[s.stream] = s.memo
		t.bytes += s.size
	}
}

// Recall returns the value of type T a committed decision left for the
// stream with Remember, if the stream is still at the version it was left
// at. The value is shared: copy it before changing it.
func Recall[T any](tx *Tx, stream string) (value T, ok bool, err error) {
	m, found := tx.memos.get(stream)
	if !found {
		return value, false, nil
	}
	v, err := tx.StreamVersion(stream)
	if err != nil {
		return value, false, err
	}
	if v != m.version {
		tx.memos.drop(stream)
		return value, false, nil
	}
	value, ok = m.value.(T)
	return value, ok, nil
}

// Remember leaves value, the stream folded as of version (which this
// decision's events bring it to), for the next decision on the stream; it
// is kept only if those events commit. size is roughly what value holds, in
// bytes, for the table's bound.
//
// value must be exactly what folding the stream's events would give: the
// next decision takes it instead. It must not be a nil pointer or
// interface: Recall would return it as found.
func Remember[T any](tx *Tx, stream string, version int64, value T, size int) {
	tx.staged = append(tx.staged, stagedMemo{stream: stream, memo: memo{version: version, value: value, size: size}})
}

// Forget drops the stream's memo once this decision commits (a job that
// has finished will not be decided on again).
func (tx *Tx) Forget(stream string) {
	tx.staged = append(tx.staged, stagedMemo{stream: stream})
}
