package projections

import (
	"encoding/json"
	"fmt"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
)

// Projection is one read model derived from events.
type Projection interface {
	// Name identifies the projection in dumps and errors.
	Name() string
	// Apply folds one event into the projection's tables. It runs on the
	// writer connection inside the projector's transaction; it must depend
	// on nothing but the event and the projection's own tables.
	Apply(conn *sqlite.Conn, ev ledger.Event) error
	// Reset deletes every row of the projection's tables.
	Reset(conn *sqlite.Conn) error
	// Dump writes every row, in a stable order, one JSON object per line.
	Dump(conn *sqlite.Conn, w io.Writer) error
}

// Default is the full set of projections the daemon maintains, in the order
// they are applied.
func Default() []Projection {
	return []Projection{JobQueue{}, JobLog{}, PluginFacts{}, PluginState{}, CircuitBreakers{}, CircuitBreakerTransitions{}, PluginHealth{}, EventContext{}, PipelineRuns{}, Topics{}}
}

// dumpRow writes one row as a JSON line.
func dumpRow(w io.Writer, row any) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

func wrap(p Projection, op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("projection %s: %s: %w", p.Name(), op, err)
}
