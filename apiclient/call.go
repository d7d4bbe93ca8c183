package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/errcode"
)

// maxAnswer bounds how much of an answer a Client reads.
const maxAnswer = 8 << 20

// Client calls a daemon's HTTP API with a bearer token: the routes a
// remote CLI or a topic worker uses (Topics).
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient is a Client of the API at base (https://host:port) that
// authenticates with token, over hc (NewHTTPClient).
func NewClient(base, token string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// Error is an answer of the API that is not a success: its status and the
// stable code, message and hint of its JSON body. It unwraps to
// commands.ErrStaleFence for code stale_fence, so a caller tests for a
// stale fence the same way against a local engine and a daemon.
type Error struct {
	Status  int          `json:"-"`
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Hint    string       `json:"hint,omitempty"`
	// Errors are the details of invalid input.
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location,omitempty"`
	} `json:"errors,omitempty"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	for _, d := range e.Errors {
		msg += fmt.Sprintf("; %s: %s", d.Location, d.Message)
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func (e *Error) Unwrap() error {
	if e.Code == errcode.StaleFence {
		return commands.ErrStaleFence
	}
	return nil
}

// Permanent says err will not go away by asking again: the request or the
// credentials are wrong (a 4xx other than 408, 409 and 429).
func Permanent(err error) bool {
	var a *Error
	return errors.As(err, &a) && a.Status >= 400 && a.Status < 500 && a.Status != http.StatusRequestTimeout &&
		a.Status != http.StatusConflict && a.Status != http.StatusTooManyRequests
}

// CodeOf is the API's code of err, or "" when err is no answer of the API.
func CodeOf(err error) errcode.Code {
	var a *Error
	if errors.As(err, &a) {
		return a.Code
	}
	return ""
}

// Do sends in as JSON (nil: no body) with method to path (with its query)
// and decodes a 2xx answer into out (nil, or a 204: left as it is). It
// reports whether there was a body (false for 204).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) (bool, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return false, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w (check --api: a URL such as https://host:8443)", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return false, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return false, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if out == nil || len(bytes.TrimSpace(data)) == 0 {
			return true, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return true, fmt.Errorf("%s %s: the answer is not what this client expects (is --api the daemon's API, of the same version?): %w", method, path, err)
		}
		return true, nil
	}
	a := &Error{Status: resp.StatusCode}
	if json.Unmarshal(data, a) != nil || a.Code == "" {
		a.Code, a.Message = errcode.Error, strings.TrimSpace(string(data))
		if len(a.Message) > 200 {
			a.Message = a.Message[:200] + "…"
		}
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		a.Hint = "the token is not valid: give a key made with `ductile config token create NAME --scopes …` on the daemon's machine"
	case http.StatusForbidden:
		if a.Hint == "" {
			a.Hint = "the token lacks the scope this needs, or the daemon's api.hosts does not name the host of --api"
		}
	}
	return false, fmt.Errorf("%s %s: %w", method, path, a)
}
