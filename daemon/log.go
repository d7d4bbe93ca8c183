package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// NewLogger writes JSON lines with the spec's field names: timestamp, level,
// message, and whatever attributes (component, plugin, job_id) callers add.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey:
					a.Key = "timestamp"
				case slog.MessageKey:
					a.Key = "message"
				}
			}
			return a
		},
	}))
}

// NewTextLogger writes one readable line per record, for a person at a
// terminal: local time to the millisecond, level, message, then the
// attributes as key=value (quoted when they hold spaces, quotes, = or
// control characters, so a record is always one line).
func NewTextLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&textHandler{out: &lockedWriter{w: w}, level: level})
}

// IsTerminal reports whether w is a terminal (a file whose descriptor
// answers the terminal ioctl).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// lockedWriter serialises the writes of a handler and its derivatives.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// textHandler is the slog.Handler of NewTextLogger.
type textHandler struct {
	out    *lockedWriter
	level  slog.Level
	attrs  string // rendered attributes from WithAttrs, each with a leading space
	prefix string // the open groups, "a.b." or ""
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if !r.Time.IsZero() {
		b.WriteString(r.Time.Local().Format("2006-01-02 15:04:05.000 "))
	}
	b.WriteString(levelName(r.Level))
	b.WriteByte(' ')
	b.WriteString(oneLine(r.Message))
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.prefix, a)
		return true
	})
	b.WriteByte('\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := io.WriteString(h.out.w, b.String())
	return err
}

func (h *textHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		writeAttr(&b, h.prefix, a)
	}
	c := *h
	c.attrs += b.String()
	return &c
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

// levelName pads the level to five characters so that messages line up.
func levelName(l slog.Level) string {
	s := l.String()
	return s + strings.Repeat(" ", max(0, 5-len(s)))
}

// writeAttr writes " key=value", a group's attributes each under
// "group.", and nothing for an empty attribute.
func writeAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			writeAttr(b, prefix, g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	var v string
	if a.Value.Kind() == slog.KindTime {
		v = a.Value.Time().Format(time.RFC3339Nano)
	} else {
		v = a.Value.String()
	}
	b.WriteString(quoteIfNeeded(v))
}

// quoteIfNeeded quotes v when it would not read back as one value.
func quoteIfNeeded(v string) string {
	if v == "" || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || slices.Contains([]rune{'"', '=', '\\'}, r)
	}) {
		return strconv.Quote(v)
	}
	return v
}

// oneLine keeps a message on its line: a message with a line break or
// another control character is quoted.
func oneLine(msg string) string {
	if strings.ContainsFunc(msg, unicode.IsControl) || !utf8.ValidString(msg) {
		return strconv.Quote(msg)
	}
	return msg
}
