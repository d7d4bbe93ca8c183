package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the built-in plugins' HTTP requests.
const (
	// DefaultTimeout bounds a request whose config and payload give none
	// (the job's own timeout and deadline bound it too).
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponse is how much of a response body is recorded when
	// max_response_bytes is not set.
	DefaultMaxResponse = 64 << 10
	// MaxResponseCap is the most max_response_bytes may be: the response
	// goes into the ledger, and the runner caps stdout at 10 MiB.
	MaxResponseCap = 1 << 20
)

// received is a response, its body read up to a cap.
type received struct {
	Status    int
	StatusMsg string
	Header    http.Header
	Body      []byte
	Truncated bool
	Elapsed   time.Duration
}

// send sends req with timeout and reads at most limit bytes of the body.
// An error says what happened (no answer in time, refused connection…)
// and whether a retry may help.
func send(ctx context.Context, req *http.Request, timeout time.Duration, limit int) (*received, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		return nil
	}}
	start := time.Now()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &sendError{retry: true, msg: fmt.Sprintf("no response within %v", timeout)}
		}
		return nil, &sendError{retry: true, msg: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &sendError{retry: true, msg: fmt.Sprintf("the response's body did not arrive within %v", timeout)}
		}
		return nil, &sendError{retry: true, msg: "read the response: " + err.Error()}
	}
	r := &received{Status: resp.StatusCode, StatusMsg: resp.Status, Header: resp.Header, Body: body, Elapsed: time.Since(start)}
	if len(body) > limit {
		r.Body, r.Truncated = cutUTF8(body[:limit]), true
	}
	return r, nil
}

// cutUTF8 drops a rune cut in half at the end of b.
func cutUTF8(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return b
}

type sendError struct {
	retry bool
	msg   string
}

func (e *sendError) Error() string { return e.msg }

// retryable says whether a response of status may succeed when tried again:
// a server error, 408 and 429.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// expectation is a set of accepted statuses; empty means any 2xx.
type expectation []int

func (e expectation) accepts(status int) bool {
	if len(e) == 0 {
		return status >= 200 && status < 300
	}
	return slices.Contains(e, status)
}

func (e expectation) String() string {
	if len(e) == 0 {
		return "2xx"
	}
	s := make([]string, len(e))
	for i, v := range e {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, " or ")
}

// parseExpectation reads expect_status: a number or a list of numbers.
func parseExpectation(v any) (expectation, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case float64:
		return expectation{int(v)}, checkStatuses(expectation{int(v)})
	case []any:
		var out expectation
		for _, x := range v {
			f, ok := x.(float64)
			if !ok {
				return nil, fmt.Errorf("expect_status: %v is not a status code", x)
			}
			out = append(out, int(f))
		}
		return out, checkStatuses(out)
	}
	return nil, fmt.Errorf("expect_status must be a status code or a list of them, not %v", v)
}

func checkStatuses(e expectation) error {
	for _, s := range e {
		if s < 100 || s > 599 {
			return fmt.Errorf("expect_status: %d is not an HTTP status code", s)
		}
	}
	return nil
}

// parseDuration reads a duration: a Go duration string ("10s") or a
// number of seconds.
func parseDuration(key string, v any) (time.Duration, error) {
	switch v := v.(type) {
	case nil:
		return 0, nil
	case float64:
		if v <= 0 {
			return 0, fmt.Errorf("%s must be positive", key)
		}
		return time.Duration(v * float64(time.Second)), nil
	case string:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s %q is not a positive duration (e.g. 10s)", key, v)
		}
		return d, nil
	}
	return 0, fmt.Errorf("%s must be a duration such as \"10s\", not %v", key, v)
}

// stringMap reads a map of strings (headers, query parameters).
func stringMap(key string, v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a mapping of names to strings", key)
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		switch x := x.(type) {
		case string:
			out[k] = x
		case float64, bool:
			out[k] = fmt.Sprint(x)
		default:
			return nil, fmt.Errorf("%s.%s must be a string", key, k)
		}
	}
	return out, nil
}

// stringValue reads an optional string.
func stringValue(key string, v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("%s must be a string", key)
}

// redactor replaces secrets (values from the config) in what a plugin
// writes: its result, error, events and logs go into the ledger.
type redactor []string

// Redacted is what a secret is replaced with.
const Redacted = "[redacted]"

// add adds a secret: the value, and each of its words of 8 bytes or more
// (the token of "Bearer <token>" on its own). Values shorter than 4 bytes
// are not secrets worth hiding and would blank out ordinary text.
func (r *redactor) add(values ...string) {
	for _, v := range values {
		if len(v) >= 4 {
			*r = append(*r, v)
		}
		if words := strings.Fields(v); len(words) > 1 {
			for _, w := range words {
				if len(w) >= 8 {
					*r = append(*r, w)
				}
			}
		}
	}
}

func (r redactor) clean(s string) string {
	for _, secret := range r {
		s = strings.ReplaceAll(s, secret, Redacted)
	}
	return s
}

// cleanAny redacts every string inside v (a decoded JSON value).
func (r redactor) cleanAny(v any) any {
	switch v := v.(type) {
	case string:
		return r.clean(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.clean(k)] = r.cleanAny(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.cleanAny(x)
		}
		return out
	}
	return v
}
