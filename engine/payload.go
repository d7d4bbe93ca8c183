package engine

import (
	"encoding/json"

	"github.com/ductile/ductile/commands"
)

// PayloadKind says what JSON text a front end may hand a job.
type PayloadKind int

const (
	// PayloadObject is a payload a user gives a job or a pipeline run (the
	// API's body, the CLI's --payload): a JSON object, or no text at all
	// (none).
	PayloadObject PayloadKind = iota
	// PayloadDelivery is a webhook delivery's body: any JSON value (a
	// sender's format is its own; some deliver a list), never empty.
	PayloadDelivery
)

// CheckPayload is the one rule for JSON text someone outside hands a job
// (commands.CheckPayload for an object, commands.CheckJSON for a delivery):
// the payload, nil for empty text of PayloadObject, or a
// *commands.PayloadError whose Problem follows where the text came from
// ("the body", "--payload").
func CheckPayload(text []byte, kind PayloadKind) (json.RawMessage, error) {
	if kind == PayloadDelivery {
		if err := commands.CheckJSON(text); err != nil {
			return nil, err
		}
		return json.RawMessage(text), nil
	}
	if len(text) == 0 {
		return nil, nil
	}
	return commands.CheckPayload(text)
}
