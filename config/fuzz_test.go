package config

import (
	"strings"
	"testing"
)

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "plain", "${A}", "${A:-x}", "$${A}", "a${B}c${", "${}", "${1}", "${A:-${B}}", "$$$${A}", "${A:-}"} {
		f.Add(s)
	}
	lookup := func(name string) (string, bool) {
		if name == "UNSET" {
			return "", false
		}
		return "<" + name + ">", true
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, expanded, problems := expand(s, lookup)
		if !strings.Contains(s, "${") {
			if out != s || expanded || problems != nil {
				t.Fatalf("expand(%q) = %q, %v, %v; want it unchanged", s, out, expanded, problems)
			}
		}
		if expanded && len(problems) == 0 && !strings.Contains(out, "<") && !strings.Contains(s, ":-") {
			t.Fatalf("expand(%q) = %q: expanded without a value", s, out)
		}
	})
}

// FuzzLoadData: no input makes loading panic, and a failure is always a
// ValidationError.
func FuzzLoadData(f *testing.F) {
	for _, s := range []string{
		"",
		"service: {max_workers: 2}\n",
		"x-a: &a {k: ${V}}\nplugins: {p: {config: {<<: *a, j: 1}}}\n",
		"a: &a [*a]\n",
		"routes: [{from: a, event_type: b, to: c}, 3, [x]]\n",
		"plugins: {'': {}, '../x': ~}\n",
		"service:\n  max_workers: 1\n  max_workers: 1\n",
		"--- 1\n--- 2\n",
	} {
		f.Add(s)
	}
	lookup := func(string) (string, bool) { return "v", true }
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "include") {
			t.Skip("includes read the file system")
		}
		c, err := loadData("/nonexistent/config.yaml", []byte(s), lookup)
		if err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			return
		}
		if _, err := c.MarshalJSON(); err != nil {
			t.Fatalf("marshal: %v", err)
		}
		_ = c.Redacted()
	})
}
