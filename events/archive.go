package events

// LedgerStream is the stream of facts about the ledger itself: its archives.
const LedgerStream = "ledger"

// LedgerArchived records that the log's oldest events moved to an archive
// file (ductile ledger archive), in the transaction that deleted them.
const LedgerArchived = "ledger.archived"

// LedgerArchivedData is the data of ledger.archived.
type LedgerArchivedData struct {
	File        string `json:"file"`         // base name, beside the ledger
	FirstSeq    int64  `json:"first_seq"`    // the first event archived
	LastSeq     int64  `json:"last_seq"`     // the last event archived
	Events      int64  `json:"events"`       // LastSeq - FirstSeq + 1
	PrevHash    string `json:"prev_hash"`    // hex: of event FirstSeq-1 (zeros: none)
	LastHash    string `json:"last_hash"`    // hex: of event LastSeq, which this event's chain follows
	ContentHash string `json:"content_hash"` // hex: BLAKE3 of the archive file's bytes
	Before      string `json:"before"`       // the archive moved events recorded before this time
}
