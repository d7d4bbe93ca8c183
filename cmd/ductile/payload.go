package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/errcode"
)

// maxPayloadBytes caps a payload read from a file or stdin: a job's payload
// is handed whole to its plugin on every attempt, so a large input belongs
// in a file the plugin reads, not in the ledger.
const maxPayloadBytes = 16 << 20

// readPayload returns --payload's JSON object (commands.CheckPayload, the
// API's rule too): the flag's text, the content of FILE for @FILE, or stdin
// for "-"; nil when not given (or empty). Bad input is a usage error that
// quotes at most a short excerpt of it.
func readPayload(c *cli.Context) (json.RawMessage, error) {
	arg := c.String("payload")
	var text []byte
	from := "--payload"
	switch {
	case arg == "":
		return nil, nil
	case arg == "-":
		from = "--payload - (stdin)"
		b, err := io.ReadAll(io.LimitReader(c.App.Reader, maxPayloadBytes+1))
		if err != nil {
			return nil, failf("read %s: %v", from, err)
		}
		text = b
	case arg == "@":
		return nil, usagef("--payload @ needs a file name: --payload @FILE reads the payload from FILE")
	case strings.HasPrefix(arg, "@"):
		path := arg[1:]
		from = "--payload @" + path
		f, err := os.Open(path)
		if err != nil {
			return nil, usagef("%s: %v", from, err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, usagef("%s is a directory: give a file holding the JSON", from)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxPayloadBytes+1))
		if err != nil {
			return nil, failf("read %s: %v", from, err)
		}
		text = b
	default:
		text = []byte(arg)
	}
	if len(text) > maxPayloadBytes {
		return nil, usagef("%s is larger than %d MiB: pass the plugin a path or a URL to the data instead", from, maxPayloadBytes>>20)
	}
	payload, err := commands.CheckPayload(text)
	var bad *commands.PayloadError
	switch {
	case errors.As(err, &bad) && bad.Hint != "":
		return nil, hintf(errcode.InvalidInput, bad.Hint, "%s %s", from, bad.Problem)
	case errors.As(err, &bad):
		return nil, usagef("%s %s", from, bad.Problem)
	}
	return payload, err
}

// quote quotes s for a message, cut to about 80 characters: an error must
// never echo a whole payload back.
func quote(s string) string {
	const limit = 80
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes in all)", len(s))
}
