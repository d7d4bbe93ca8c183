package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/ductile/ductile/pluginhost"
)

// httpConfig is the http plugin's config: defaults for every request, and
// the secrets (headers, query) that only the config may hold.
type httpConfig struct {
	baseURL string
	headers map[string]string // secret values
	query   map[string]string // secret values
	method  string
	timeout time.Duration
	expect  expectation
	limit   int
}

func readHTTPConfig(raw json.RawMessage) (*httpConfig, redactor, error) {
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
	}
	c := &httpConfig{timeout: DefaultTimeout, limit: DefaultMaxResponse}
	var err error
	var secrets redactor
	if c.headers, err = stringMap("headers", m["headers"]); err != nil {
		return nil, nil, err
	}
	if c.query, err = stringMap("query", m["query"]); err != nil {
		return nil, nil, err
	}
	for _, v := range c.headers {
		secrets.add(v)
	}
	for _, v := range c.query {
		secrets.add(v)
	}
	if c.baseURL, err = stringValue("base_url", m["base_url"]); err != nil {
		return nil, nil, err
	}
	if c.baseURL != "" {
		u, err := url.Parse(c.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("base_url must be an http:// or https:// URL")
		}
		if p, ok := u.User.Password(); ok {
			secrets.add(p)
		}
	}
	if c.method, err = stringValue("method", m["method"]); err != nil {
		return nil, nil, err
	}
	if d, err := parseDuration("timeout", m["timeout"]); err != nil {
		return nil, nil, err
	} else if d > 0 {
		c.timeout = d
	}
	if c.expect, err = parseExpectation(m["expect_status"]); err != nil {
		return nil, nil, err
	}
	if c.limit, err = readLimit(m["max_response_bytes"], c.limit); err != nil {
		return nil, nil, err
	}
	return c, secrets, nil
}

func readLimit(v any, def int) (int, error) {
	switch v := v.(type) {
	case nil:
		return def, nil
	case float64:
		if v < 0 || v > MaxResponseCap {
			return 0, fmt.Errorf("max_response_bytes must be between 0 and %d", MaxResponseCap)
		}
		return int(v), nil
	}
	return 0, fmt.Errorf("max_response_bytes must be a number of bytes")
}

// httpCall is one request, planned.
type httpCall struct {
	method  string
	url     *url.URL
	header  http.Header
	body    []byte
	timeout time.Duration
	expect  expectation
	limit   int
}

var methodRE = regexp.MustCompile(`^[A-Z]+$`)

// planHTTP makes the request payload describes over config c. The config's
// headers and query parameters go only to URLs under its base_url (to every
// URL when it has none), so a payload cannot send them elsewhere.
func planHTTP(c *httpConfig, p map[string]any) (*httpCall, error) {
	call := &httpCall{method: c.method, timeout: c.timeout, expect: c.expect, limit: c.limit, header: http.Header{}}
	raw, err := stringValue("url", p["url"])
	if err != nil {
		return nil, err
	}
	if raw == "" && c.baseURL == "" {
		return nil, fmt.Errorf("no url: give one in the payload (or a base_url in the config)")
	}
	full := raw
	if u, err := url.Parse(raw); err == nil && !u.IsAbs() && c.baseURL != "" {
		full = strings.TrimRight(c.baseURL, "/")
		if raw != "" {
			full += "/" + strings.TrimLeft(raw, "/")
		}
	}
	if call.url, err = url.Parse(full); err != nil || (call.url.Scheme != "http" && call.url.Scheme != "https") || call.url.Host == "" {
		return nil, fmt.Errorf("url %q must be an http:// or https:// URL (or a path under the config's base_url)", raw)
	}
	trusted := c.baseURL == "" || strings.HasPrefix(full, strings.TrimRight(c.baseURL, "/")+"/") || full == c.baseURL
	extraQuery, err := stringMap("query", p["query"])
	if err != nil {
		return nil, err
	}
	q := call.url.Query()
	for k, v := range extraQuery {
		q.Set(k, v)
	}
	if trusted {
		for k, v := range c.query {
			q.Set(k, v)
		}
		for k, v := range c.headers {
			call.header.Set(k, v)
		}
	}
	call.url.RawQuery = q.Encode()
	headers, err := stringMap("headers", p["headers"])
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		call.header.Set(k, v)
	}
	switch b := p["body"].(type) {
	case nil:
	case string:
		call.body = []byte(b)
	default:
		if call.body, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		if call.header.Get("Content-Type") == "" {
			call.header.Set("Content-Type", "application/json")
		}
	}
	if m, err := stringValue("method", p["method"]); err != nil {
		return nil, err
	} else if m != "" {
		call.method = m
	}
	call.method = strings.ToUpper(call.method)
	if call.method == "" {
		call.method = http.MethodGet
		if call.body != nil {
			call.method = http.MethodPost
		}
	}
	if !methodRE.MatchString(call.method) {
		return nil, fmt.Errorf("method %q is not an HTTP method", call.method)
	}
	if d, err := parseDuration("timeout", p["timeout"]); err != nil {
		return nil, err
	} else if d > 0 {
		call.timeout = d
	}
	if e, err := parseExpectation(p["expect_status"]); err != nil {
		return nil, err
	} else if e != nil {
		call.expect = e
	}
	if call.limit, err = readLimit(p["max_response_bytes"], call.limit); err != nil {
		return nil, err
	}
	return call, nil
}

// shown is the request's URL as recorded: no user info, no query values
// (the config's may be secrets; the redactor would catch them, this keeps
// the rest short too).
func (c *httpCall) shown() string {
	u := *c.url
	u.User = nil
	q := u.Query()
	for k := range q {
		q.Set(k, "…")
	}
	u.RawQuery = q.Encode()
	s := u.String()
	return strings.ReplaceAll(s, "%E2%80%A6", "…")
}

func runHTTP(ctx context.Context, req *request) *pluginhost.Response {
	cfg, secrets, err := readHTTPConfig(req.Config)
	if err != nil {
		return failed(false, "http: %s (fix plugins.http.config)", secrets.clean(err.Error()))
	}
	switch req.Command {
	case "health":
		return &pluginhost.Response{Status: pluginhost.StatusOK, Result: "http: config ok"}
	case "handle":
	default:
		return unknownCommand("http", req.Command)
	}
	payload, err := req.payload()
	if err != nil {
		return failed(false, "http: %v", err)
	}
	call, err := planHTTP(cfg, payload)
	if err != nil {
		return failed(false, "http: %s", secrets.clean(err.Error()))
	}
	hr, err := http.NewRequest(call.method, call.url.String(), bytes.NewReader(call.body))
	if err != nil {
		return failed(false, "http: %s", secrets.clean(err.Error()))
	}
	hr.Header = call.header
	what := call.method + " " + call.shown()
	got, err := send(ctx, hr, call.timeout, call.limit)
	if err != nil {
		se, _ := err.(*sendError)
		return failed(se == nil || se.retry, "http: %s: %s", what, secrets.clean(err.Error()))
	}
	if !call.expect.accepts(got.Status) {
		return failed(retryable(got.Status), "http: %s: status %s, expected %s: %s", what, got.StatusMsg, call.expect,
			secrets.clean(excerpt(got.Body, 512)))
	}
	out := map[string]any{
		"method": call.method, "url": call.shown(), "status": got.Status, "status_text": got.StatusMsg,
		"headers": firstValues(got.Header), "body": string(got.Body), "truncated": got.Truncated,
		"bytes": len(got.Body), "duration_ms": got.Elapsed.Milliseconds(),
	}
	if !got.Truncated && json.Valid(got.Body) && strings.Contains(got.Header.Get("Content-Type"), "json") {
		var decoded any
		_ = json.Unmarshal(got.Body, &decoded)
		out["json"] = decoded
	}
	payloadOut, err := json.Marshal(secrets.cleanAny(normalize(out)))
	if err != nil {
		return failed(false, "http: encode the response: %v", err)
	}
	result := fmt.Sprintf("%s: %s (%d bytes", what, got.StatusMsg, len(got.Body))
	if got.Truncated {
		result += fmt.Sprintf(", truncated at max_response_bytes %d", call.limit)
	}
	result += ")"
	return &pluginhost.Response{Status: pluginhost.StatusOK, Result: secrets.clean(result),
		Events: []pluginhost.Event{{Type: "http.response", Payload: payloadOut}}}
}

// normalize turns out's values into what JSON decoding gives (so that the
// redactor sees every string).
func normalize(v map[string]any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return v
	}
	return out
}

func firstValues(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k := range maps.Keys(h) {
		out[k] = h.Get(k)
	}
	return out
}

// excerpt is the start of body as text, at most n bytes.
func excerpt(body []byte, n int) string {
	if len(body) > n {
		return string(cutUTF8(body[:n])) + "…"
	}
	if len(body) == 0 {
		return "(empty body)"
	}
	return string(body)
}
