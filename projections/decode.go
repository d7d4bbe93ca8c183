package projections

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Decoding event data for a replay. encoding/json is most of a replay's
// cost, so the events a replay meets most are first decoded by a fast path
// that handles only the simple shape ductile writes: one compact object
// whose keys are the struct's own field names, strings with at most
// two-character escapes, integers, booleans, and raw values copied as they
// are. On anything else (a \u escape, a null, a key it does not know,
// whitespace) it gives up and
// encoding/json decodes the event, so the result is always exactly what
// json.Unmarshal gives (TestFastDecodeIsEncodingJSON, FuzzFastDecode).

// decodeData decodes an event's data into d (a pointer to an events type)
// as json.Unmarshal would.
func decodeData(data []byte, d any) error {
	if decodeFast(data, d) {
		return nil
	}
	return json.Unmarshal(data, d)
}

// decodeMeta decodes an event's meta as Event.Metadata does.
func decodeMeta(ev ledger.Event) (ledger.Meta, error) {
	var m ledger.Meta
	if objectFields(ev.Meta, func(key, val []byte) bool {
		switch string(key) {
		case "correlation_id":
			return plainString(val, &m.CorrelationID)
		case "causation_id":
			return plainString(val, &m.CausationID)
		case "actor":
			return plainString(val, &m.Actor)
		}
		return false
	}) {
		return m, nil
	}
	return ev.Metadata()
}

// decodeFast fills d from data and reports whether it could; when it could
// not, d may be half filled and must be decoded again from scratch.
func decodeFast(data []byte, d any) bool {
	switch d := d.(type) {
	case *events.Enqueued:
		return objectFields(data, func(key, val []byte) bool {
			switch string(key) {
			case "job_id":
				return plainString(val, &d.JobID)
			case "plugin":
				return plainString(val, &d.Plugin)
			case "command":
				return plainString(val, &d.Command)
			case "payload":
				return raw(val, &d.Payload)
			case "max_attempts":
				return integer(val, &d.MaxAttempts)
			case "backoff_base_ms":
				return integer(val, &d.BackoffBaseMS)
			case "submitted_by":
				return plainString(val, &d.SubmittedBy)
			case "dedupe_key":
				return plainString(val, &d.DedupeKey)
			case "dedupe_ttl_ms":
				return integer(val, &d.DedupeTTLMS)
			case "parent_job_id":
				return plainString(val, &d.ParentJobID)
			case "source_event_id":
				return plainString(val, &d.SourceEventID)
			case "event":
				return raw(val, &d.Event)
			case "depth":
				return integer(val, &d.Depth)
			case "task_id":
				return plainString(val, &d.TaskID)
			case "trace_id":
				return plainString(val, &d.TraceID)
			case "idempotency_key":
				return plainString(val, &d.IdempotencyKey)
			case "root_job_id":
				return plainString(val, &d.RootJobID)
			case "run_attempt":
				return integer(val, &d.RunAttempt)
			}
			return false
		})
	case *events.Started:
		return objectFields(data, func(key, val []byte) bool {
			switch string(key) {
			case "attempt":
				return integer(val, &d.Attempt)
			case "deadline_at":
				return plainString(val, &d.DeadlineAt)
			case "pid":
				return integer(val, &d.PID)
			case "worker":
				return worker(val, &d.Worker)
			case "plugin":
				if len(val) > 0 && val[0] == 'n' {
					return false // null: encoding/json's
				}
				if d.Plugin == nil {
					d.Plugin = &events.PluginProcess{}
				}
				p := d.Plugin
				return objectFields(val, func(key, val []byte) bool {
					switch string(key) {
					case "pgid":
						return integer(val, &p.PGID)
					case "start_ticks":
						return integer(val, &p.StartTicks)
					case "boot_id":
						return plainString(val, &p.BootID)
					}
					return false
				})
			}
			return false
		})
	case *events.AttemptEnded:
		return objectFields(data, func(key, val []byte) bool {
			switch string(key) {
			case "attempt":
				return integer(val, &d.Attempt)
			case "error":
				return plainString(val, &d.Error)
			case "kind":
				return plainString(val, &d.Kind)
			case "retryable":
				return boolean(val, &d.Retryable)
			case "exit_code":
				return integer(val, &d.ExitCode)
			case "duration_ms":
				return integer(val, &d.DurationMS)
			case "response":
				return raw(val, &d.Response)
			case "stdout":
				return plainString(val, &d.Stdout)
			case "stdout_bytes":
				return integer(val, &d.StdoutBytes)
			case "stderr":
				return plainString(val, &d.Stderr)
			case "stderr_truncated":
				return boolean(val, &d.StderrTruncated)
			case "stderr_bytes":
				return integer(val, &d.StderrBytes)
			case "worker":
				return worker(val, &d.Worker)
			}
			return false
		})
	case *events.FactRecorded:
		return objectFields(data, func(key, val []byte) bool {
			switch string(key) {
			case "fact_type":
				return plainString(val, &d.FactType)
			case "job_id":
				return plainString(val, &d.JobID)
			case "command":
				return plainString(val, &d.Command)
			case "fact":
				return raw(val, &d.Fact)
			case "compatibility_view":
				return plainString(val, &d.View)
			}
			return false
		})
	case *events.StateMerged:
		return objectFields(data, func(key, val []byte) bool {
			switch string(key) {
			case "job_id":
				return plainString(val, &d.JobID)
			case "command":
				return plainString(val, &d.Command)
			case "updates":
				return raw(val, &d.Updates)
			case "state":
				return raw(val, &d.State)
			}
			return false
		})
	}
	return false
}

// worker decodes a job.started's or an attempt's end's worker into *w.
func worker(val []byte, w **events.Worker) bool {
	if len(val) > 0 && val[0] == 'n' {
		return false // null: encoding/json's
	}
	if *w == nil {
		*w = &events.Worker{}
	}
	d := *w
	return objectFields(val, func(key, val []byte) bool {
		switch string(key) {
		case "name":
			return plainString(val, &d.Name)
		case "pid":
			return integer(val, &d.PID)
		}
		return false
	})
}

// objectFields calls set with each key and value of the compact JSON
// object data (no whitespace outside strings; keys without escapes), in
// order, and reports whether data was such an object and set accepted
// every field.
func objectFields(data []byte, set func(key, val []byte) bool) bool {
	n := len(data)
	if n < 2 || data[0] != '{' || data[n-1] != '}' {
		return false
	}
	if n == 2 {
		return true
	}
	for i := 1; ; {
		if data[i] != '"' {
			return false
		}
		end := valueEnd(data, i)
		if end < 0 || end >= n || data[end] != ':' {
			return false
		}
		key := data[i+1 : end-1]
		for _, c := range key {
			if c == '\\' {
				return false
			}
		}
		i = end + 1
		end = valueEnd(data, i)
		if end < 0 || end >= n || !set(key, data[i:end]) {
			return false
		}
		switch data[end] {
		case ',':
			i = end + 1
		case '}':
			return end == n-1
		default:
			return false
		}
	}
}

// valueEnd returns the index just past the JSON value that starts at
// data[i], or -1 if there is none (it trusts the value to be valid JSON,
// as every stored event's data is, and only finds where it ends).
func valueEnd(data []byte, i int) int {
	n := len(data)
	if i >= n {
		return -1
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < n; j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < n; j++ {
			switch data[j] {
			case '"':
				end := valueEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < n; j++ {
		switch data[j] {
		case ',', '}', ']':
			return j
		case ' ', '\t', '\n', '\r':
			return -1
		}
	}
	return -1
}

// plainString sets s to the JSON string val as encoding/json decodes it,
// if val is valid UTF-8 without control characters and its only escapes
// are the two-character ones (\n, \", \\ …): then the decoded string is
// its bytes with those replaced. A \u escape (surrogates) or an invalid
// byte (which encoding/json replaces with U+FFFD) is left to encoding/json.
func plainString[S ~string](val []byte, s *S) bool {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return false
	}
	body := val[1 : len(val)-1]
	escapes := false
	for _, c := range body {
		if c < 0x20 {
			return false
		}
		escapes = escapes || c == '\\'
	}
	if !utf8.Valid(body) {
		return false
	}
	if !escapes {
		*s = S(body)
		return true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i++; i == len(body) {
			return false
		}
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return false
		}
	}
	*s = S(out)
	return true
}

// integer sets v to the JSON integer val (digits, an optional minus),
// within v's range, as encoding/json would; anything else (a fraction, an
// exponent, an overflow) is left to encoding/json.
func integer[T int | int64 | uint64](val []byte, v *T) bool {
	neg := len(val) > 0 && val[0] == '-'
	digits := val
	if neg {
		if var0 := T(0); var0-1 > var0 {
			return false // unsigned: encoding/json refuses it
		}
		digits = val[1:]
	}
	if len(digits) == 0 || len(digits) > 18 { // 18 digits never overflow int64
		return false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if int64(T(n)) != n {
		return false
	}
	*v = T(n)
	return true
}

func boolean(val []byte, b *bool) bool {
	switch string(val) {
	case "true":
		*b = true
	case "false":
		*b = false
	default:
		return false
	}
	return true
}

// raw sets m to the value val as it stands, as encoding/json does for a
// json.RawMessage (a null, which it keeps as "null", is left to it).
func raw(val []byte, m *json.RawMessage) bool {
	if len(val) == 0 || val[0] == 'n' {
		return false
	}
	*m = val
	return true
}
