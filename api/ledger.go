package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/views"
)

// registerLedger adds the ledger's operations: a page of its events and
// its verification.
func (s *Server) registerLedger() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "read-ledger", Method: http.MethodGet, Path: "/ledger/events", Summary: "A page of the ledger's events, oldest first, after a seq",
		Description: "The events after seq after, filtered by type and stream prefix, at most limit of them; one call looks at no more than " +
			"10,000 events, so a filter that matches few answers a short page: go on from next until it reaches head. " +
			"GET /events streams the same events live.",
		Errors: []int{http.StatusBadRequest},
	}, auth.EventsRO), s.handleReadLedger)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "verify-ledger", Method: http.MethodGet, Path: "/ledger/verify", Summary: "Verify the ledger's hash chain, archives and head",
		Description: "What ductile ledger verify checks before it compares the projections with a replay (which only the CLI does): " +
			"every event follows the previous one in the hash chain, each archive holds what was recorded of it, and the log ends where it was recorded to end. " +
			"ok false names the problem; the call itself succeeds.",
	}, auth.EventsRO), s.handleVerifyLedger)
}

// ReadLedgerInput is GET /ledger/events's query.
type ReadLedgerInput struct {
	After        int64  `query:"after" minimum:"0" doc:"Start after this seq (0: from the first event)"`
	Type         string `query:"type" maxLength:"128" doc:"Only events of this type (job.enqueued, …: docs/events.md)"`
	StreamPrefix string `query:"stream_prefix" maxLength:"256" doc:"Only events of streams that begin with this (job/, run/, plugin/echo, …)"`
	Limit        int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"The most events to return"`
}

// LedgerEvents is a page of the ledger's events.
type LedgerEvents struct {
	Body views.LedgerPage
}

func (s *Server) handleReadLedger(ctx context.Context, in *ReadLedgerInput) (*LedgerEvents, error) {
	page, err := views.ReadLedgerPage(ctx, s.opts.Ledger, views.LedgerQuery{After: in.After, Type: in.Type, StreamPrefix: in.StreamPrefix, Limit: in.Limit})
	if err != nil {
		return nil, errorOf(err)
	}
	return &LedgerEvents{Body: page}, nil
}

// LedgerVerified is GET /ledger/verify's answer.
type LedgerVerified struct {
	Body views.LedgerCheck
}

func (s *Server) handleVerifyLedger(ctx context.Context, _ *struct{}) (*LedgerVerified, error) {
	check, err := views.CheckLedger(ctx, s.opts.Ledger)
	if err != nil {
		return nil, errorOf(err)
	}
	return &LedgerVerified{Body: check}, nil
}
