// Package builtin holds the plugins built into the ductile executable,
// http and notify, and runs them.
//
// Each speaks protocol v2 like any plugin: discovery finds it in the
// bundled root, where plugins.Unpack writes its manifest and an entrypoint
// script, run, that executes the ductile binary itself as
// "ductile builtin NAME"; that hidden command calls Run, which reads the
// request on stdin and writes the response on stdout. So the runner,
// timeouts, process groups, caps and protocol apply to them as to any
// other plugin, and the host needs no curl, jq or Python.
package builtin

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ductile/ductile/pluginhost"
)

//go:embed http/manifest.yaml notify/manifest.yaml
var manifests embed.FS

// EntrypointFile is the entrypoint script of every built-in plugin.
const EntrypointFile = "run"

// maxRequest bounds what Run reads from stdin.
const maxRequest = 16 << 20

// handlers are the built-in plugins by name.
var handlers = map[string]func(ctx context.Context, req *request) *pluginhost.Response{
	"http":   runHTTP,
	"notify": runNotify,
}

// Names returns the built-in plugins' names, sorted.
func Names() []string {
	names := make([]string, 0, len(handlers))
	for n := range handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Manifest returns the manifest.yaml of the built-in plugin name.
func Manifest(name string) ([]byte, error) {
	return manifests.ReadFile(path.Join(name, pluginhost.ManifestFile))
}

// Entrypoint returns the entrypoint script of the built-in plugin name for
// the ductile executable at exe: it execs "exe builtin name".
func Entrypoint(exe, name string) []byte {
	return []byte("#!/bin/sh\n# Written by ductile: runs the plugin built into the ductile executable.\nexec " +
		shellQuote(exe) + " builtin " + shellQuote(name) + "\n")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// request is the protocol v2 request as the built-in plugins read it.
type request struct {
	Protocol   int             `json:"protocol"`
	JobID      string          `json:"job_id"`
	Command    string          `json:"command"`
	Config     json.RawMessage `json:"config"`
	Event      *event          `json:"event"`
	DeadlineAt time.Time       `json:"deadline_at"`
}

type event struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// payload is the event's payload as an object (empty without one).
func (r *request) payload() (map[string]any, error) {
	out := map[string]any{}
	if r.Event == nil || len(bytes.TrimSpace(r.Event.Payload)) == 0 || string(bytes.TrimSpace(r.Event.Payload)) == "null" {
		return out, nil
	}
	if err := json.Unmarshal(r.Event.Payload, &out); err != nil {
		return nil, fmt.Errorf("the event's payload is not a JSON object: %w", err)
	}
	return out, nil
}

// Run runs the built-in plugin name on the request read from stdin and
// writes its response to stdout; it returns the process's exit status:
// 0 once a response is written, 78 (EX_CONFIG) for a request of another
// protocol, 64 for an unknown plugin or a request that is not JSON.
func Run(ctx context.Context, name string, stdin io.Reader, stdout, stderr io.Writer) int {
	handle, ok := handlers[name]
	if !ok {
		fmt.Fprintf(stderr, "ductile builtin: no built-in plugin %q (there are: %s)\n", name, strings.Join(Names(), ", "))
		return 64
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxRequest))
	if err != nil {
		fmt.Fprintf(stderr, "%s: read request: %v\n", name, err)
		return 64
	}
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		fmt.Fprintf(stderr, "%s: the request on stdin is not protocol v2 JSON: %v\n", name, err)
		return 64
	}
	if req.Protocol != pluginhost.ProtocolVersion {
		fmt.Fprintf(stderr, "%s: unsupported protocol %d (this plugin speaks protocol %d)\n", name, req.Protocol, pluginhost.ProtocolVersion)
		return 78
	}
	if !req.DeadlineAt.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.DeadlineAt)
		defer cancel()
	}
	resp := handle(ctx, &req)
	out, err := json.Marshal(resp)
	if err != nil {
		fmt.Fprintf(stderr, "%s: encode response: %v\n", name, err)
		return 70
	}
	if _, err := stdout.Write(append(out, '\n')); err != nil {
		return 74
	}
	return 0
}

// failed is an error response; retry says whether another attempt may
// succeed.
func failed(retry bool, format string, args ...any) *pluginhost.Response {
	return &pluginhost.Response{Status: pluginhost.StatusError, Error: fmt.Sprintf(format, args...), Retry: &retry}
}

// unknownCommand answers a command the plugin does not have.
func unknownCommand(plugin, command string) *pluginhost.Response {
	return failed(false, "%s: unknown command %q", plugin, command)
}
