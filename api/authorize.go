package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
)

// bearerScheme names the security scheme of the OpenAPI document.
const bearerScheme = "bearer"

// scopeKey is the operation metadata key of the scope a route needs; an
// operation without one needs no token. writeScopeKey, on POST /plugin,
// is the further scope a command not of type read needs.
const (
	scopeKey      = "scope"
	writeScopeKey = "write_scope"
)

// authorizationKey is the context key of the request's Authorization
// header, for a handler that needs a further scope (a write command).
type authorizationKey struct{}

// check asks the guard whether authorization grants need; without a guard
// (no tokens configured) nothing is granted.
func (s *Server) check(authorization string, need auth.Scope) (string, error) {
	if s.opts.Guard == nil {
		return "", newError(http.StatusUnauthorized,
			"no API tokens are configured: make one with: ductile config token create NAME --scopes "+string(need)+" (then reload the daemon)",
			"the API has no tokens")
	}
	token, err := s.opts.Guard.Check(authorization, need)
	if errors.Is(err, auth.ErrForbidden) {
		who := "the token"
		if token != "" {
			who = fmt.Sprintf("token %q", token)
		}
		e := newError(http.StatusForbidden,
			fmt.Sprintf("use a token with %s (or *), or make one: ductile config token create NAME --scopes %s; each route's scope is in GET /openapi.json (security) and docs/api.md", need, need),
			fmt.Sprintf("%s does not grant %s, which this route needs", who, need))
		e.Scope = string(need)
		return token, e
	}
	if err != nil {
		return "", errorOf(err)
	}
	return token, nil
}

// authorize is the huma middleware that checks the scope an operation
// names in its metadata.
func (s *Server) authorize(ctx huma.Context, next func(huma.Context)) {
	need, ok := ctx.Operation().Metadata[scopeKey].(auth.Scope)
	if !ok {
		next(ctx)
		return
	}
	authorization := ctx.Header("Authorization")
	token, err := s.check(authorization, need)
	if err != nil {
		e := errorOf(err)
		_ = huma.WriteErr(s.api, ctx, e.Status, e.Message, withHint{e})
		return
	}
	next(huma.WithValue(huma.WithValue(ctx, authorizationKey{}, authorization), tokenKey{}, token))
}

// tokenKey is the context key of the name of the token that passed
// authorize.
type tokenKey struct{}

// tokenOf is the name of the token the request was authorized with ("":
// none).
func tokenOf(ctx context.Context) string {
	name, _ := ctx.Value(tokenKey{}).(string)
	return name
}

// require checks a further scope inside a handler, with the Authorization
// header authorize kept.
func (s *Server) require(ctx context.Context, need auth.Scope) error {
	authorization, _ := ctx.Value(authorizationKey{}).(string)
	_, err := s.check(authorization, need)
	return err
}

// withHint carries an Error through huma.WriteErr so that the response
// keeps its code and hint.
type withHint struct{ e *Error }

func (w withHint) Error() string { return w.e.Message }

// secured is an operation that needs scope need.
func secured(op huma.Operation, need auth.Scope) huma.Operation {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[scopeKey] = need
	op.Security = []map[string][]string{{bearerScheme: {string(need)}}}
	op.Errors = append(op.Errors, http.StatusUnauthorized, http.StatusForbidden)
	return op
}

// RouteScope is the scope one route needs.
type RouteScope struct {
	Method string     `json:"method"`
	Path   string     `json:"path"`
	Scope  auth.Scope `json:"scope"`          // "" for none: no token needed
	When   string     `json:"when,omitempty"` // the requests it is for, when not all
}

// RouteScopes is the scope each route needs, from the operations as
// registered (the OpenAPI document's security says the same), by path and
// method.
func RouteScopes() []RouteScope { return New(Options{}).routeScopes() }

func (s *Server) routeScopes() []RouteScope {
	var out []RouteScope
	for path, item := range s.api.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{http.MethodGet: item.Get, http.MethodPost: item.Post} {
			if op == nil {
				continue
			}
			need, _ := op.Metadata[scopeKey].(auth.Scope)
			write, ok := op.Metadata[writeScopeKey].(auth.Scope)
			if !ok {
				out = append(out, RouteScope{Method: method, Path: path, Scope: need})
				continue
			}
			out = append(out, RouteScope{Method: method, Path: path, Scope: need, When: "a command of type read"},
				RouteScope{Method: method, Path: path, Scope: write, When: "any other command"})
		}
	}
	slices.SortStableFunc(out, func(a, b RouteScope) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out
}
