package commands_test

import (
	"encoding/json"
	"testing"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// FuzzCheckExport: whatever a plugin sends, CheckExport never panics, and
// an item it accepts is one of the four types, within every cap, with a
// metadata that is a JSON object.
func FuzzCheckExport(f *testing.F) {
	f.Add("text", "hello", "", []byte(nil), `{"a":1}`)
	f.Add("url", "", "https://x", []byte(nil), "")
	f.Add("binary", "", "", []byte{1, 2}, " ")
	f.Add("binary_url", "", "u", []byte(nil), "null")
	f.Add("file", "t", "", []byte(nil), "[1]")
	f.Fuzz(func(t *testing.T, typ, text, url string, bin []byte, meta string) {
		item := events.Exported{Type: events.ExportType(typ), Text: text, URL: url, Binary: bin, Metadata: json.RawMessage(meta)}
		if typ == "binary_url" {
			item.URL, item.BinaryURL = "", url
		}
		if commands.CheckExport(item) != nil {
			return
		}
		if len(item.Text) > commands.MaxExportText || len(item.Binary) > commands.MaxExportBinary ||
			len(item.URL) > commands.MaxExportURL || len(item.BinaryURL) > commands.MaxExportURL || len(item.Metadata) > commands.MaxExportMetadata {
			t.Fatalf("accepted an item over a cap: %+v", item)
		}
		if len(item.Metadata) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(item.Metadata, &obj); err != nil || obj == nil {
				t.Fatalf("accepted metadata %q that is not a JSON object", item.Metadata)
			}
		}
	})
}
