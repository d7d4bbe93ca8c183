package commands

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/ledger"
)

// Handoff is what a worker records when its plugin's process has exited and
// another job is waiting for its slot: the exited job's outcome and the
// next job's start.
type Handoff struct {
	Complete Complete
	Next     Start
}

// HandoffResult answers each half of a Handoff as CompleteJob and StartJob
// would: one may fail while the other lands.
type HandoffResult struct {
	Completed   CompleteResult
	CompleteErr error
	Started     Started
	StartErr    error
}

// HandOff records the outcome, then the next start, queued together so that
// they share one commit (ledger.DecideEach). The outcome comes first: a next
// job of the same plugin starts with the state the outcome left.
func HandOff(ctx context.Context, l *ledger.Ledger, h Handoff) HandoffResult {
	var res HandoffResult
	routing := h.Complete.prepare()
	var completed CompleteResult
	seqs, errs := l.DecideEach(ctx, ledger.Relaxed, h.Complete.decision(&completed), h.Next.decision(&res.Started))
	res.Completed, res.CompleteErr = h.Complete.answer(completed, seqs[0], routing, errs[0])
	if res.StartErr = errs[1]; res.StartErr != nil {
		res.Started, res.StartErr = Started{}, fmt.Errorf("start job: %w", res.StartErr)
	}
	return res
}
