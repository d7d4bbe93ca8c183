package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// Report is what a running daemon says of itself that its ledger cannot
// hold: whether its HTTP API serves, and whether its writes to the ledger
// fail (it could not record that they do). system status reads it.
type Report struct {
	PID    int                `json:"pid"`
	API    views.APIState     `json:"api"`
	Writes ledger.WriteHealth `json:"writes"`
}

// ReportPath is the daemon's report in a state directory.
func ReportPath(stateDir string) string { return filepath.Join(stateDir, "ductile.report") }

// reportSize is the report file's fixed size. It is written whole at start,
// while the disk has room, and then rewritten in place: a rewrite needs no
// new block, so it still lands when the disk is full, which is when it
// matters most.
const reportSize = 4096

// reportFile is the daemon's report on disk.
type reportFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// openReport creates the report file at its full size.
func openReport(stateDir string) (*reportFile, error) {
	path := ReportPath(stateDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		if _, err = f.WriteAt([]byte(strings.Repeat(" ", reportSize)), 0); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("write the daemon's report %s: %w", path, err)
	}
	return &reportFile{f: f, path: path}, nil
}

// update rewrites the report with what d says of itself now; nothing once
// closed. A failure is logged: the report is advice, the daemon runs on.
func (r *reportFile) update(d *Daemon) {
	if r == nil {
		return
	}
	rep := Report{PID: os.Getpid(), API: d.APIState(), Writes: d.Ledger.WriteHealth()}
	if len(rep.Writes.LastError) > reportSize/2 {
		rep.Writes.LastError = rep.Writes.LastError[:reportSize/2] + "…"
	}
	b, err := json.Marshal(rep)
	if err == nil && len(b) > reportSize {
		err = errors.New("too long")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return
	}
	if err == nil {
		_, err = r.f.WriteAt(append(b, strings.Repeat(" ", reportSize-len(b))...), 0)
	}
	if err != nil {
		d.log.Warn("could not write the daemon's report: system status may not show the API's or the ledger's state", "file", r.path, "err", err.Error())
	}
}

// close removes the report: no daemon stands behind it any more.
func (r *reportFile) close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.f
	r.f = nil
	return errors.Join(f.Close(), os.Remove(r.path))
}

// ReadReport reads the report of the daemon of a state directory whose
// PID is pid (the lock's holder); false if it left none.
func ReadReport(stateDir string, pid int) (Report, bool, error) {
	b, err := os.ReadFile(ReportPath(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, fmt.Errorf("read the daemon's report: %w", err)
	}
	var rep Report
	if len(strings.TrimSpace(string(b))) == 0 || json.Unmarshal(b, &rep) != nil || rep.PID != pid {
		return Report{}, false, nil // not written yet, or another daemon's
	}
	return rep, true, nil
}
