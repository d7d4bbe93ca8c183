package engine

import "github.com/ductile/ductile/ledger"

// OnLedger is the Engine of the same applied config acting on l: a CLI
// checks what it was asked against the Engine before it opens the ledger
// (nil: none open, the Engine only checks). The pipeline runtime and the
// tokens are shared.
func (e *Engine) OnLedger(l *ledger.Ledger) *Engine {
	c := New(Options{Ledger: l, Config: e.config, Applied: e.applied, Plugins: e.plugins, Pipelines: e.pipelines.Set, StartRun: e.startRun})
	c.pipelines, c.auth = e.pipelines, e.auth
	return c
}
