package views

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// FleetWorker is a remote worker host as the ledger knows it: its last
// registration, and the leases it holds on running jobs now.
type FleetWorker struct {
	Name        string   `json:"name"`
	Host        string   `json:"host"`
	Version     string   `json:"version"`
	PID         int      `json:"pid,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Plugins     []string `json:"plugins" doc:"The plugins it registered"`
	// RegisteredAt is when it last registered (RFC 3339).
	RegisteredAt string `json:"registered_at"`
	// LastSeen is the latest of its registration and the claims and
	// recorded renewals of the leases it holds now (renewals are recorded
	// at most once per third of the lease period).
	LastSeen string `json:"last_seen" doc:"The latest of its registration, and the claim or last recorded renewal of a lease it holds now"`
	// Claims is how many running jobs it holds leases on.
	Claims int          `json:"claims" doc:"How many running jobs it holds leases on now"`
	Leases []FleetLease `json:"leases"`
}

// FleetLease is a lease a worker holds on a running job.
type FleetLease struct {
	JobID      string `json:"job_id"`
	Plugin     string `json:"plugin"`
	Attempt    int    `json:"attempt"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
}

// ReadFleet reads every registered worker, by name, with the leases it
// holds: the workers' streams, and the streams of the running jobs (few:
// the workers' slots). It reads only the ledger: with or without a daemon.
func ReadFleet(ctx context.Context, l *ledger.Ledger) ([]FleetWorker, error) {
	byName := map[string]*FleetWorker{}
	if err := readRegistrations(ctx, l, byName); err != nil {
		return nil, err
	}
	var ids []string
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListActiveJobs(conn, func(r queries.ListActiveJobsRow) error {
			ids = append(ids, r.ID)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read the workers' leases: %w", err)
	}
	for _, id := range ids {
		evs, err := l.ReadStream(ctx, events.JobStream(id))
		if err != nil {
			return nil, fmt.Errorf("read the workers' leases: %w", err)
		}
		j, err := commands.FoldJob(evs)
		if err != nil {
			return nil, fmt.Errorf("read the workers' leases: job %s: %w", id, err)
		}
		lease := j.Leased()
		if lease == nil {
			continue
		}
		w := byName[lease.Worker]
		if w == nil { // its registration was archived, or it never registered
			w = &FleetWorker{Name: lease.Worker, Plugins: []string{}}
			byName[lease.Worker] = w
		}
		w.Claims++
		w.Leases = append(w.Leases, FleetLease{JobID: id, Plugin: j.Plugin, Attempt: j.Attempt, Fence: lease.Fence, LeaseUntil: lease.LeaseUntil})
		if seen := lastLeaseEvent(evs, lease.Fence); seen > w.LastSeen {
			w.LastSeen = seen
		}
	}
	out := make([]FleetWorker, 0, len(byName))
	for _, w := range byName {
		if w.Leases == nil {
			w.Leases = []FleetLease{}
		}
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b FleetWorker) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// readRegistrations reads the last registration of every worker stream.
func readRegistrations(ctx context.Context, l *ledger.Ledger, into map[string]*FleetWorker) error {
	var streams []string
	prefix := events.WorkerStream("")
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: prefix, Until: prefix[:len(prefix)-1] + "0", MaxStreams: 100000},
			func(s string) error {
				streams = append(streams, s)
				return nil
			})
	})
	if err != nil {
		return fmt.Errorf("read the workers' registrations: %w", err)
	}
	for _, s := range streams {
		ev, ok, err := l.LastEvent(ctx, s)
		if err != nil {
			return fmt.Errorf("read the workers' registrations: %w", err)
		}
		if !ok || ev.Type != events.WorkerRegistered {
			continue
		}
		var r events.WorkerRegisteredData
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return fmt.Errorf("read the registration of %s: %w", s, err)
		}
		w := &FleetWorker{Name: r.Name, Host: r.Host, Version: r.Version, PID: r.PID, Concurrency: r.Concurrency, Plugins: []string{},
			RegisteredAt: recordedAt(ev.RecordedAt)}
		w.LastSeen = w.RegisteredAt
		for _, p := range r.Plugins {
			w.Plugins = append(w.Plugins, p.Name)
		}
		into[r.Name] = w
	}
	return nil
}

// lastLeaseEvent is when the last job.started or job.lease_renewed of the
// lease under fence was recorded ("": none).
func lastLeaseEvent(evs []ledger.Event, fence int64) string {
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		switch ev.Type {
		case events.JobLeaseRenewed:
			var d events.LeaseRenewed
			if json.Unmarshal(ev.Data, &d) == nil && d.Fence == fence {
				return recordedAt(ev.RecordedAt)
			}
		case events.JobStarted:
			return recordedAt(ev.RecordedAt)
		}
	}
	return ""
}

// recordedAt formats an event's time in RFC 3339, UTC, to the millisecond
// (a fixed width: two of them compare as strings).
func recordedAt(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
