package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a config file: where it is, and how to fix it.
type FieldError struct {
	// File is relative to the config directory when inside it, else absolute.
	File string
	// Line is 1-based; 0 when the problem is not tied to a line.
	Line int
	// Path is the dotted key path, e.g. plugins.echo.retry.max_attempts,
	// with [i] for list items; "" for problems with the file as a whole.
	Path string
	// Msg says what is wrong and what to do about it.
	Msg string
}

// Error returns "file:line: path: msg".
func (e FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// ValidationError lists every problem Load found, ordered by file (in load
// order), then line.
type ValidationError struct {
	Errors []FieldError
}

// Error returns one problem per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}
