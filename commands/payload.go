package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ductile/ductile/events"
)

// PayloadError is JSON text a front end refuses as a payload. Problem says
// what is wrong with it, to follow where it came from ("--payload", "the
// body"); Hint, when set, what to do instead.
type PayloadError struct {
	Problem string
	Hint    string
}

func (e *PayloadError) Error() string { return "payload " + e.Problem }

// Unwrap makes a PayloadError an ErrInvalidCommand.
func (e *PayloadError) Unwrap() error { return ErrInvalidCommand }

// CheckJSON is the rule for JSON text that someone outside hands to a job
// (a payload, a webhook delivery): not empty, nesting at most
// MaxPayloadDepth levels, valid JSON, valid UTF-8 (JSON text must be, and a
// plugin that hands it back would fail on it). Its error is a
// *PayloadError.
func CheckJSON(text []byte) error {
	// Depth first: encoding/json refuses JSON nested over 10,000 levels as
	// invalid, which would hide why.
	if d := events.JSONDepth(text); d > MaxPayloadDepth {
		return &PayloadError{Problem: fmt.Sprintf("is too deep: it nests %d levels, and a payload may nest at most %d", d, MaxPayloadDepth),
			Hint: "flatten it, or pass the plugin a path or a URL to the data"}
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return &PayloadError{Problem: "is empty: give a JSON object, e.g. {}"}
	}
	var valid json.RawMessage // validated without building the values
	if err := json.Unmarshal(text, &valid); err != nil {
		return &PayloadError{Problem: "is not valid JSON: " + jsonProblem(text, err)}
	}
	if !utf8.Valid(text) {
		return &PayloadError{Problem: "is not valid UTF-8 (JSON text must be)", Hint: "convert it, e.g. with iconv -t UTF-8"}
	}
	return nil
}

// CheckPayload is the one rule for a payload a user gives a job or a
// pipeline run (the CLI's --payload, the API's body): CheckJSON's, and a
// JSON object, since a plugin reads its input as event.payload.<key> and a
// pipeline step as payload.<key>. No payload at all is the caller's case
// (none for a job, {} for a run), never empty text. Its error is a
// *PayloadError.
func CheckPayload(text []byte) (json.RawMessage, error) {
	if err := CheckJSON(text); err != nil {
		return nil, err
	}
	if bytes.TrimLeft(text, " \t\r\n")[0] != '{' {
		return nil, &PayloadError{Problem: `must be a JSON object, like {"url": "…"}`,
			Hint: "a plugin reads its input as event.payload.<key>; wrap a list or a value in an object"}
	}
	return json.RawMessage(text), nil
}

// jsonProblem describes a JSON syntax error by where it is (the line and
// column of the last byte read) and the few bytes up to there, never more:
// a short payload quoted whole, or a long one in part, may hold a secret.
func jsonProblem(text []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	read := text[:min(int(se.Offset), len(text))]
	line := 1 + bytes.Count(read, []byte("\n"))
	column := len(read) - bytes.LastIndexByte(read, '\n') - 1
	upTo := read[max(0, len(read)-12):]
	for len(upTo) > 0 && !utf8.RuneStart(upTo[0]) {
		upTo = upTo[1:]
	}
	return fmt.Sprintf("%v at line %d, column %d (the text up to there ends %s)", se, line, column, strconv.Quote(string(upTo)))
}
