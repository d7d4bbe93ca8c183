package events

// LedgerRestoreAdopted records that a ledger restored from a backup or a
// replica, older than the head witness beside it, was adopted (ductile
// ledger adopt-restore): the events after HeadSeq that the witness vouched
// for are not in this ledger, and the witness now follows this one.
const LedgerRestoreAdopted = "ledger.restore_adopted"

// LedgerRestoreAdoptedData is the data of ledger.restore_adopted.
type LedgerRestoreAdoptedData struct {
	HeadSeq     int64  `json:"head_seq"`     // the restored log's newest event before this one
	HeadHash    string `json:"head_hash"`    // hex: its hash
	WitnessSeq  int64  `json:"witness_seq"`  // the seq the head witness named
	WitnessHash string `json:"witness_hash"` // hex: the hash it named
	Missing     int64  `json:"missing"`      // WitnessSeq - HeadSeq: events recorded after the copy was taken, not in it
}
