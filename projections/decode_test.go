package projections

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// decodeTargets are fresh values of every type decodeFast knows, and of one
// it does not.
func decodeTargets() []any {
	return []any{new(events.Enqueued), new(events.Started), new(events.AttemptEnded),
		new(events.FactRecorded), new(events.StateMerged), new(ledger.Meta), new(events.Dead)}
}

// sameAsEncodingJSON requires that, for valid JSON data, decodeFast either
// gives up or decodes exactly what json.Unmarshal decodes, for every
// target type (decodeMeta's fast path for ledger.Meta).
func sameAsEncodingJSON(t *testing.T, data []byte) (fast int) {
	t.Helper()
	if !json.Valid(data) {
		return 0 // stored event data is always valid JSON (a CHECK)
	}
	for _, target := range decodeTargets() {
		got := reflect.New(reflect.TypeOf(target).Elem()).Interface()
		ok := decodeFast(data, got)
		if m, isMeta := got.(*ledger.Meta); isMeta {
			var err error
			*m, err = decodeMeta(ledger.Event{Meta: data})
			ok = err == nil
		}
		want := reflect.New(reflect.TypeOf(target).Elem()).Interface()
		err := json.Unmarshal(data, want)
		if !ok {
			continue
		}
		fast++
		if err != nil {
			t.Fatalf("%T from %s: the fast path decoded what encoding/json refuses (%v)", target, data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from %s:\nfast path     %+v\nencoding/json %+v", target, data, got, want)
		}
	}
	return fast
}

// TestFastDecodeIsEncodingJSON decodes what ductile writes, and awkward
// variations of it, both ways: the fast path must decode the common shapes
// and agree with encoding/json on everything it decodes.
func TestFastDecodeIsEncodingJSON(t *testing.T) {
	mustFast := []string{
		`{"job_id":"01a1","plugin":"echo","command":"poll","payload":{"a":[1,2,{"b":"}]"}]},"max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli","dedupe_key":"k","dedupe_ttl_ms":60000,"parent_job_id":"p","source_event_id":"e","event":{"type":"x","payload":"\"quoted\" \\ \u00e9"}}`,
		`{"job_id":"01a2","plugin":"echo","command":"poll","max_attempts":1,"submitted_by":"api","task_id":"t","trace_id":"tr","idempotency_key":"k","root_job_id":"01a0","run_attempt":3}`,
		`{"attempt":1,"deadline_at":"2026-11-25T10:44:22.029509766Z","pid":31704}`,
		`{"attempt":1,"deadline_at":"2026-11-25T10:44:22.029509766Z","pid":31704,"plugin":{"pgid":31790,"start_ticks":123456789,"boot_id":"0e1f6c2a-5b8e-4f51-9d37-2f1b0c9a7e11"}}`,
		`{"attempt":1,"deadline_at":"2026-11-25T10:44:22.029509766Z","pid":31704,"worker":{"name":"box/local","pid":31704},"plugin":{"pgid":31790,"start_ticks":1,"boot_id":"b"}}`,
		`{"attempt":1,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":3,"worker":{"name":"box/local","pid":31704}}`,
		`{"attempt":2,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":96,"response":{"status":"ok","result":"echo poll"},"stderr":"line one\nline \"two\"\t\\ /\r\b\f","stderr_truncated":true}`,
		`{"attempt":1,"error":"exit 3: βeta 🚀","kind":"error","retryable":true,"exit_code":-1,"duration_ms":-9223372036854775}`,
		`{"attempt":1,"error":"stdout exceeded 10485760 bytes; plugin killed","kind":"protocol_error","retryable":true,"exit_code":-1,"duration_ms":40,"stdout":"oo\n[ductile: 9 bytes left out here; 13 bytes in all]\noo","stdout_bytes":13,"stderr":"e\n[ductile: 1 bytes left out here; 3 bytes in all]\ne","stderr_truncated":true,"stderr_bytes":3}`,
		`{"fact_type":"echo.snapshot","job_id":"j","command":"poll","fact":{"runs":1},"compatibility_view":"mirror_object"}`,
		`{"job_id":"j","command":"poll","updates":{"a":1},"state":{"a":1,"b":[]}}`,
		`{"correlation_id":"c","causation_id":"d","actor":"dispatcher"}`,
		`{}`,
	}
	for _, data := range mustFast {
		if sameAsEncodingJSON(t, []byte(data)) == 0 {
			t.Errorf("the fast path decoded nothing of %s", data)
		}
	}
	for _, data := range []string{
		`{"plugin":"a\u00e9b"}`, `{"plugin":"\ud83d\ude80"}`, `{"plugin":"\udc00"}`, // \u escapes: encoding/json's
		`{"plugin":"bad` + "\xff" + `"}`,                // invalid UTF-8: replaced by encoding/json
		`{"Plugin":"x"}`, `{"PLUGIN":"x","plugin":"y"}`, // keys matched without case by encoding/json
		`{"plugin":"a","plugin":"b"}`, `{"attempt":1,"attempt":2}`, // the last one wins
		`{"plugin":null}`, `{"payload":null}`, `{"retryable":null}`, // null
		`{ "plugin":"x"}`, `{"plugin" :"x"}`, `{"attempt":1 }`, ` {"attempt":1}`, // whitespace
		`{"worker":null}`, `{"worker":{"name":"a","x":1}}`, `{"worker":{"name":"a"},"worker":{"pid":2}}`,
		`{"plugin":{"pgid":1,"start_ticks":-1}}`, `{"plugin":{"start_ticks":18446744073709551615}}`, `{"plugin":null}`, `{"plugin":{"x":1}}`,
		`{"attempt":1.0}`, `{"attempt":1e3}`, `{"attempt":99999999999999999999}`, `{"attempt":-0}`, // numbers
		`{"attempt":"1"}`, `{"plugin":1}`, `{"retryable":1}`, `{"payload":"text"}`, // other types
		`{"unknown":1}`, `{"plugin":"x","extra":{"nested":"}"}}`, `[]`, `"s"`, `null`, `{"a\"b":1}`,
	} {
		sameAsEncodingJSON(t, []byte(data))
	}
}

// FuzzFastDecode checks the fast path against encoding/json on arbitrary
// valid JSON.
func FuzzFastDecode(f *testing.F) {
	for _, seed := range []string{
		`{"attempt":1,"deadline_at":"2026-11-25T10:44:22.029509766Z","pid":31704,"worker":{"name":"box/local","pid":31704},"plugin":{"pgid":31790,"start_ticks":1,"boot_id":"b"}}`,
		`{"attempt":1,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":3,"worker":{"name":"box/local","pid":31704}}`,
		`{"attempt":2,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":96,"response":{"status":"ok"},"stderr":"a\nb"}`,
		`{"job_id":"01a1","plugin":"echo","command":"poll","payload":{"a":[1,"]"]},"max_attempts":4,"event":{"x":"\\"}}`,
		`{"fact_type":"t","fact":{"runs":1},"compatibility_view":"mirror_object"}`,
		`{"correlation_id":"c","actor":"cli"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsEncodingJSON(t, data) })
}
