package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/ductile/ductile/pluginhost"
)

// Notification services.
const (
	ServiceNtfy    = "ntfy"
	ServiceGotify  = "gotify"
	ServiceDiscord = "discord"
	ServiceSlack   = "slack"
	ServiceWebhook = "webhook"
)

// DefaultMessage is the message template when neither the payload nor the
// config gives one: the payload's message or text, else the payload as
// JSON.
const DefaultMessage = `{{if .message}}{{.message}}{{else if .text}}{{.text}}{{else}}{{json .}}{{end}}`

// maxMessage is how many characters a service takes in one message.
func maxMessage(service string) int {
	if service == ServiceDiscord {
		return 2000
	}
	return 4096
}

// notifyConfig is the notify plugin's config.
type notifyConfig struct {
	service  string
	url      string // secret: a Discord or Slack webhook URL is its own key
	token    string // secret
	headers  map[string]string
	title    string // template
	message  string // template
	priority any
	tags     []string
	timeout  time.Duration
}

func readNotifyConfig(raw json.RawMessage) (*notifyConfig, redactor, error) {
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
	}
	c := &notifyConfig{timeout: 15 * time.Second, priority: m["priority"]}
	var secrets redactor
	var err error
	for key, dst := range map[string]*string{"service": &c.service, "url": &c.url, "token": &c.token, "title": &c.title, "message": &c.message} {
		if *dst, err = stringValue(key, m[key]); err != nil {
			return nil, nil, err
		}
	}
	secrets.add(c.url, c.token)
	if c.headers, err = stringMap("headers", m["headers"]); err != nil {
		return nil, nil, err
	}
	for _, v := range c.headers {
		secrets.add(v)
	}
	switch t := m["tags"].(type) {
	case nil:
	case string:
		c.tags = strings.Split(t, ",")
	case []any:
		for _, x := range t {
			c.tags = append(c.tags, fmt.Sprint(x))
		}
	default:
		return nil, secrets, fmt.Errorf("tags must be a list of strings")
	}
	if d, err := parseDuration("timeout", m["timeout"]); err != nil {
		return nil, secrets, err
	} else if d > 0 {
		c.timeout = d
	}
	switch c.service {
	case ServiceNtfy, ServiceGotify, ServiceDiscord, ServiceSlack, ServiceWebhook:
	case "":
		return nil, secrets, fmt.Errorf("service is not set: set plugins.notify.config.service to ntfy, gotify, discord, slack or webhook, and url")
	default:
		return nil, secrets, fmt.Errorf("service %q is not one of ntfy, gotify, discord, slack, webhook", c.service)
	}
	if u, err := url.Parse(c.url); c.url == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, secrets, fmt.Errorf("url must be the service's http:// or https:// URL (set plugins.notify.config.url)")
	}
	for key, text := range map[string]string{"title": c.title, "message": c.message} {
		if _, err := parseTemplate(key, text); err != nil {
			return nil, secrets, err
		}
	}
	return c, secrets, nil
}

// templateFuncs are the functions a notify template may call besides Go
// text/template's own.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"truncate": func(n int, s string) string {
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		return string([]rune(s)[:n]) + "…"
	},
	"default": func(def string, v any) any {
		if v == nil || v == "" {
			return def
		}
		return v
	},
}

func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s template: %w", name, err)
	}
	return t, nil
}

// render executes the template text on payload.
func render(name, text string, payload map[string]any) (string, error) {
	t, err := parseTemplate(name, text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, payload); err != nil {
		return "", fmt.Errorf("%s template: %w", name, err)
	}
	return b.String(), nil
}

// note is a notification, rendered.
type note struct {
	title, message string
	priority       any
}

// compose renders the notification of payload: the message template is
// the payload's template, else the config's message, else DefaultMessage;
// the title is the payload's title, else the config's title template.
func compose(c *notifyConfig, p map[string]any) (*note, error) {
	text := DefaultMessage
	if c.message != "" {
		text = c.message
	}
	if t, err := stringValue("template", p["template"]); err != nil {
		return nil, err
	} else if t != "" {
		text = t
	}
	n := &note{priority: c.priority}
	var err error
	if n.message, err = render("message", text, p); err != nil {
		return nil, err
	}
	if t, err := stringValue("title", p["title"]); err != nil {
		return nil, err
	} else if t != "" {
		n.title = t
	} else if n.title, err = render("title", c.title, p); err != nil {
		return nil, err
	}
	if v, ok := p["priority"]; ok {
		n.priority = v
	}
	n.message = clip(strings.TrimSpace(n.message), maxMessage(c.service))
	if n.message == "" {
		return nil, fmt.Errorf("the message is empty (the template made nothing of the payload)")
	}
	return n, nil
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// request makes the service's HTTP request for n.
func (c *notifyConfig) request(n *note, payload map[string]any) (*http.Request, error) {
	post := func(u string, body any) (*http.Request, error) {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		return r, nil
	}
	heading := func(format string) string {
		if n.title == "" {
			return n.message
		}
		return fmt.Sprintf(format, n.title) + "\n" + n.message
	}
	switch c.service {
	case ServiceNtfy:
		r, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(n.message))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "text/plain; charset=utf-8")
		if n.title != "" {
			r.Header.Set("Title", n.title)
		}
		if n.priority != nil {
			r.Header.Set("Priority", fmt.Sprint(n.priority))
		}
		if len(c.tags) > 0 {
			r.Header.Set("Tags", strings.Join(c.tags, ","))
		}
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		return r, nil
	case ServiceGotify:
		u := strings.TrimRight(c.url, "/")
		if !strings.HasSuffix(u, "/message") {
			u += "/message"
		}
		body := map[string]any{"message": n.message, "title": n.title}
		if f, ok := n.priority.(float64); ok {
			body["priority"] = int(f)
		}
		r, err := post(u, body)
		if err != nil {
			return nil, err
		}
		r.Header.Set("X-Gotify-Key", c.token)
		return r, nil
	case ServiceDiscord:
		return post(c.url, map[string]any{"content": clip(heading("**%s**"), maxMessage(ServiceDiscord))})
	case ServiceSlack:
		return post(c.url, map[string]any{"text": heading("*%s*")})
	}
	r, err := post(c.url, map[string]any{"title": n.title, "message": n.message, "priority": n.priority, "payload": payload})
	if err != nil {
		return nil, err
	}
	for k, v := range c.headers {
		r.Header.Set(k, v)
	}
	return r, nil
}

func runNotify(ctx context.Context, req *request) *pluginhost.Response {
	if req.Command == "health" && unconfigured(req.Config) {
		// Bundled with every install: not being used is not a fault.
		return &pluginhost.Response{Status: pluginhost.StatusOK, Result: "notify: not configured (set plugins.notify.config.service and url to use it)"}
	}
	cfg, secrets, err := readNotifyConfig(req.Config)
	if err != nil {
		return failed(false, "notify: %s", secrets.clean(err.Error()))
	}
	switch req.Command {
	case "health":
		return &pluginhost.Response{Status: pluginhost.StatusOK, Result: "notify: config ok (" + cfg.service + ")"}
	case "handle", "send":
	default:
		return unknownCommand("notify", req.Command)
	}
	payload, err := req.payload()
	if err != nil {
		return failed(false, "notify: %v", err)
	}
	n, err := compose(cfg, payload)
	if err != nil {
		return failed(false, "notify: %s", secrets.clean(err.Error()))
	}
	hr, err := cfg.request(n, payload)
	if err != nil {
		return failed(false, "notify: %s", secrets.clean(err.Error()))
	}
	got, err := send(ctx, hr, cfg.timeout, 16<<10)
	if err != nil {
		se, _ := err.(*sendError)
		return failed(se == nil || se.retry, "notify: %s: %s", cfg.service, secrets.clean(err.Error()))
	}
	if got.Status < 200 || got.Status > 299 {
		return failed(retryable(got.Status), "notify: %s answered %s: %s", cfg.service, got.StatusMsg, secrets.clean(excerpt(got.Body, 512)))
	}
	out, err := json.Marshal(secrets.cleanAny(map[string]any{"service": cfg.service, "status": float64(got.Status), "title": n.title, "message": n.message}))
	if err != nil {
		return failed(false, "notify: %v", err)
	}
	return &pluginhost.Response{Status: pluginhost.StatusOK, Result: fmt.Sprintf("notify: sent to %s (%s)", cfg.service, got.StatusMsg),
		Events: []pluginhost.Event{{Type: "notify.sent", Payload: out}}}
}

// unconfigured reports whether the config sets neither service nor url.
func unconfigured(raw json.RawMessage) bool {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m["service"] == nil && m["url"] == nil
}
