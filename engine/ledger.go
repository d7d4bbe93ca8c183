package engine

import (
	"encoding/json"

	"github.com/ductile/ductile/ledger"
)

// OnLedger is the Engine of the same applied config acting on l: a CLI
// checks what it was asked against the Engine before it opens the ledger
// (nil: none open, the Engine only checks). The pipeline runtime and the
// tokens are shared.
func (e *Engine) OnLedger(l *ledger.Ledger) *Engine {
	return &Engine{ledger: l, config: e.config, applied: e.applied, plugins: e.plugins, pipelines: e.pipelines,
		auth: e.auth, startRun: e.startRun, fleet: e.fleet, configs: map[string]json.RawMessage{}}
}
