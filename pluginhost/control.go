package pluginhost

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ductile/ductile/events"
)

// The control channel: every plugin process gets the write end of a pipe as
// file descriptor ControlFD, on which it may write one JSON object per line
// (progress, export items) while it runs. docs/plugin-development.md
// ("Progress, export items and cancellation") is the plugin author's view.
const (
	// ControlFD is the plugin's file descriptor of its control channel.
	ControlFD = 3
	// EnvControlFD names the environment variable that holds ControlFD.
	EnvControlFD = "DUCTILE_CONTROL_FD"
	// EnvRunID names the environment variable that holds the run's id (its
	// job's id).
	EnvRunID = "DUCTILE_RUN_ID"
	// EnvTraceID names the environment variable that holds the run's trace
	// id, set only when the run has one.
	EnvTraceID = "DUCTILE_TRACE_ID"

	// MaxControlLine is the longest control line read (1 MiB, newline
	// excluded): a longer one is refused and skipped up to its newline.
	MaxControlLine = 1 << 20
	// MaxProgressMessage and MaxProgressStage bound a progress line's
	// message and stage, in bytes.
	MaxProgressMessage = 4 << 10
	MaxProgressStage   = 256
	// MaxControlRefusalText is how much of a refused line a refusal quotes.
	MaxControlRefusalText = 120

	// controlReadsPerWake bounds how many reads of the control pipe one
	// wake-up makes (32 KiB each), so a plugin writing without pause never
	// delays the run's timeout, cancel or exit handling.
	controlReadsPerWake = 8
)

// ControlMessage is one line a plugin wrote on its control channel, parsed
// and checked for shape (RunOptions.Control). Exactly one of Progress and
// Export is set on an accepted line (both, if the line held both); Refused
// is set, alone, on a refused one.
type ControlMessage struct {
	// Line is the line's number on the channel, from 1.
	Line int
	// Progress is a progress line: Progress (in [0, 1]; nil when only a
	// message or a stage was given), Message, Stage. Attempt and Lines are
	// left for the caller.
	Progress *events.Progressed
	// Export is an export item: Type and the field it needs (Text, URL,
	// BinaryURL or Binary) set; MIME, Description and Metadata (a JSON
	// object) as given. ExportItemID, Attempt and TraceID are left for the
	// caller.
	Export *events.Exported
	// Refused says why the line was refused, quoting its start.
	Refused string
}

// controlLine is a control line as decoded.
type controlLine struct {
	Progress json.RawMessage `json:"progress"`
	Message  *string         `json:"message"`
	Stage    *string         `json:"stage"`
	Export   *controlExport  `json:"export"`
}

// controlExport is an export line's item as decoded.
type controlExport struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text"`
	URL         string          `json:"url"`
	BinaryURL   string          `json:"binary_url"`
	Binary      *string         `json:"binary"` // base64
	MIME        string          `json:"mime"`
	Description string          `json:"description"`
	Metadata    json.RawMessage `json:"metadata"`
}

// ParseControlLine parses one control line (without its newline) into what
// it reports, or says why it is refused: not one JSON object, nothing it
// knows of (no progress, message, stage or export key), a progress outside
// [0, 1], a message or stage over its cap, an export item of an unknown
// type or without the field its type needs, metadata not an object. Keys it
// does not know are ignored beside known ones. Caps on the export item's
// size are the caller's (engine.RunReport.Export).
func ParseControlLine(line []byte) (ControlMessage, error) {
	line = bytes.TrimSpace(line)
	if len(line) > MaxControlLine {
		return ControlMessage{}, fmt.Errorf("longer than %d bytes: write large outputs to a file and export its URL", MaxControlLine)
	}
	if len(line) == 0 || line[0] != '{' {
		return ControlMessage{}, errors.New("not a JSON object")
	}
	if !utf8.Valid(line) {
		return ControlMessage{}, errors.New("not valid UTF-8: JSON text must be UTF-8 (encode bytes as base64 in an export of type binary)")
	}
	if m, ok := parseSimpleProgress(line); ok {
		return m, nil
	}
	return decodeControlLine(line)
}

// decodeControlLine is ParseControlLine's reading of a JSON object through
// encoding/json.
func decodeControlLine(line []byte) (ControlMessage, error) {
	var cl controlLine
	if err := json.Unmarshal(line, &cl); err != nil {
		return ControlMessage{}, fmt.Errorf("not a control object: %w", err)
	}
	var m ControlMessage
	progress := len(cl.Progress) > 0 && string(cl.Progress) != "null"
	if progress || cl.Message != nil || cl.Stage != nil {
		p, err := cl.progressed(progress)
		if err != nil {
			return ControlMessage{}, err
		}
		m.Progress = p
	}
	if cl.Export != nil {
		e, err := cl.Export.exported()
		if err != nil {
			return ControlMessage{}, fmt.Errorf("export: %w", err)
		}
		m.Export = e
	}
	if m.Progress == nil && m.Export == nil {
		return ControlMessage{}, errors.New(`no "progress", "message", "stage" or "export" in it`)
	}
	return m, nil
}

// progressed is the progress part of a line; progress says it has a
// progress value (not null).
func (cl *controlLine) progressed(progress bool) (*events.Progressed, error) {
	p := &events.Progressed{}
	if progress {
		var v float64
		if err := json.Unmarshal(cl.Progress, &v); err != nil || math.IsNaN(v) || v < 0 || v > 1 {
			return nil, fmt.Errorf("progress must be a number from 0 to 1, not %s", quote(cl.Progress))
		}
		p.Progress = &v
	}
	if cl.Message != nil {
		if len(*cl.Message) > MaxProgressMessage {
			return nil, fmt.Errorf("message is %d bytes, over its cap of %d", len(*cl.Message), MaxProgressMessage)
		}
		p.Message = *cl.Message
	}
	if cl.Stage != nil {
		if len(*cl.Stage) > MaxProgressStage {
			return nil, fmt.Errorf("stage is %d bytes, over its cap of %d", len(*cl.Stage), MaxProgressStage)
		}
		p.Stage = *cl.Stage
	}
	return p, nil
}

// exported is the export item of a line.
func (ce *controlExport) exported() (*events.Exported, error) {
	e := &events.Exported{
		Type: events.ExportType(ce.Type), URL: ce.URL, BinaryURL: ce.BinaryURL,
		MIME: ce.MIME, Description: ce.Description,
	}
	if ce.Binary != nil {
		b, err := base64.StdEncoding.DecodeString(*ce.Binary)
		if err != nil {
			return nil, fmt.Errorf("binary must be base64 (standard alphabet, padded): %w", err)
		}
		e.Binary = b
	}
	if ce.Text != nil {
		e.Text = *ce.Text
	}
	var missing bool
	switch e.Type {
	case events.ExportText:
		missing = ce.Text == nil
	case events.ExportURL:
		missing = ce.URL == ""
	case events.ExportBinaryURL:
		missing = ce.BinaryURL == ""
	case events.ExportBinary:
		missing = e.Binary == nil
	default:
		types := make([]string, 0, 4)
		for _, t := range events.ExportTypes() {
			types = append(types, string(t))
		}
		return nil, fmt.Errorf("type %q is not one of %s", ce.Type, strings.Join(types, ", "))
	}
	if missing {
		return nil, fmt.Errorf("an item of type %s needs %q", e.Type, e.Type)
	}
	if md := bytes.TrimSpace(ce.Metadata); len(md) > 0 && string(md) != "null" {
		if md[0] != '{' {
			return nil, errors.New("metadata must be a JSON object")
		}
		e.Metadata = json.RawMessage(md)
	}
	return e, nil
}

// quote is b as a refusal quotes it: at most MaxControlRefusalText bytes
// (cut on a rune boundary).
func quote(b []byte) string {
	if len(b) <= MaxControlRefusalText {
		return fmt.Sprintf("%q", b)
	}
	cut := MaxControlRefusalText
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", b[:cut])
}

// controlReader is the parent's end of the control channel: it cuts what it
// reads into lines, parses them and hands them to deliver.
type controlReader struct {
	fd int // -1 once closed
	// deliver gets each line, parsed; nil: lines are read and dropped
	// (before the plugin's request is written, and when the caller set no
	// RunOptions.Control).
	deliver func(ControlMessage)
	partial []byte // the start of a line whose newline has not come yet
	// skipping is set while the rest of a line over MaxControlLine is read
	// and dropped.
	skipping bool
	lines    int // lines seen (numbers them)
	accepted int
	refused  int
}

// write takes what was read next.
func (c *controlReader) write(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.keep(b)
			return
		}
		piece := b[:i]
		b = b[i+1:]
		if c.skipping {
			c.skipping = false
			c.partial = c.partial[:0]
			continue
		}
		if len(c.partial) > 0 {
			if len(c.partial)+len(piece) > MaxControlLine {
				c.refuse(c.next(), fmt.Sprintf("longer than %d bytes: write large outputs to a file and export its URL", MaxControlLine), c.partial)
				c.partial = c.partial[:0]
				continue
			}
			c.partial = append(c.partial, piece...)
			piece = c.partial
		}
		c.line(piece)
		c.partial = c.partial[:0]
	}
}

// keep holds b, the start of a line, until its newline comes; past
// MaxControlLine the line is refused and its rest skipped.
func (c *controlReader) keep(b []byte) {
	if c.skipping {
		return
	}
	if len(c.partial)+len(b) > MaxControlLine {
		c.refuse(c.next(), fmt.Sprintf("longer than %d bytes: write large outputs to a file and export its URL", MaxControlLine), append(c.partial, b[:min(len(b), MaxControlRefusalText)]...))
		c.partial = nil // a buffer of a MiB is not kept for the rest of the run
		c.skipping = true
		return
	}
	c.partial = append(c.partial, b...)
}

// end takes the last line, written without a newline before the channel
// closed.
func (c *controlReader) end() {
	if !c.skipping && len(bytes.TrimSpace(c.partial)) > 0 {
		c.line(c.partial)
	}
	c.partial, c.skipping = nil, false
}

// next numbers the next line.
func (c *controlReader) next() int {
	c.lines++
	return c.lines
}

// line parses one whole line and delivers it; blank lines are skipped.
func (c *controlReader) line(b []byte) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	n := c.next()
	if c.deliver == nil {
		return
	}
	m, err := ParseControlLine(b)
	if err != nil {
		c.refuse(n, err.Error(), b)
		return
	}
	c.accepted++
	m.Line = n
	c.deliver(m)
}

// refuse counts line n as refused and tells deliver why.
func (c *controlReader) refuse(n int, why string, text []byte) {
	if c.deliver == nil {
		return
	}
	c.refused++
	c.deliver(ControlMessage{Line: n, Refused: fmt.Sprintf("control line %d refused: %s: %s", n, why, quote(bytes.TrimSpace(text)))})
}

// parseSimpleProgress reads the line most plugins write most often, a
// progress line in compact JSON with plain strings
// ({"progress":0.4,"message":"4 of 10","stage":"upload"}), without
// reflection; anything else is not simple (false) and is left to
// encoding/json, which reads a simple line the same way. The line is valid
// UTF-8 (ParseControlLine checked).
func parseSimpleProgress(line []byte) (ControlMessage, bool) {
	rest, ok := bytes.CutPrefix(line, []byte{'{'})
	var p events.Progressed
	var seen [3]bool
	for ok {
		var key []byte
		if key, rest, ok = plainControlString(rest); !ok {
			break
		}
		if rest, ok = bytes.CutPrefix(rest, []byte{':'}); !ok {
			break
		}
		switch string(key) {
		case "progress":
			var num []byte
			if num, rest, ok = jsonNumber(rest); !ok || seen[0] {
				return ControlMessage{}, false
			}
			v, err := strconv.ParseFloat(string(num), 64)
			if err != nil || v < 0 || v > 1 {
				return ControlMessage{}, false // encoding/json says why
			}
			p.Progress, seen[0] = &v, true
		case "message", "stage":
			var text []byte
			if text, rest, ok = plainControlString(rest); !ok {
				return ControlMessage{}, false
			}
			field, cap, i := &p.Message, MaxProgressMessage, 1
			if key[0] == 's' {
				field, cap, i = &p.Stage, MaxProgressStage, 2
			}
			if seen[i] || len(text) > cap {
				return ControlMessage{}, false
			}
			*field, seen[i] = string(text), true
		default:
			return ControlMessage{}, false
		}
		if string(rest) == "}" {
			return ControlMessage{Progress: &p}, true
		}
		rest, ok = bytes.CutPrefix(rest, []byte{','})
	}
	return ControlMessage{}, false
}

// plainControlString cuts a JSON string without escapes or control
// characters off the start of b: its text and what follows it.
func plainControlString(b []byte) (text, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// jsonNumber cuts a JSON number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
// off the start of b.
func jsonNumber(b []byte) (num, rest []byte, ok bool) {
	i := 0
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return nil, nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return nil, nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, nil, false
		}
	}
	return b[:i], b[i:], true
}
