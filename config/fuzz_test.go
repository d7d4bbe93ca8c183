package config

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// FuzzExpand: a string without "${" is left alone; an escaped string
// expands to itself, alone or around a placeholder; a default is used as
// written. The corpus is in testdata/fuzz/FuzzExpand.
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
		out, expanded, _, problems := expand(s, lookup)
		if !strings.Contains(s, "${") {
			if out != s || expanded || problems != nil {
				t.Fatalf("expand(%q) = %q, %v, %v; want it unchanged", s, out, expanded, problems)
			}
		}

		// Escaped, any text is a literal, also beside a placeholder.
		escaped := escapePlaceholders(s)
		if out, expanded, _, problems := expand(escaped, lookup); out != s || expanded || problems != nil {
			t.Fatalf("expand(escapePlaceholders(%q)) = expand(%q) = %q, %v, %v; want the literal back", s, escaped, out, expanded, problems)
		}
		// (A "$" right before a placeholder cannot be written: "$${" is
		// the literal "${".)
		if !strings.HasSuffix(s, "$") {
			around := escaped + "${A}" + escaped
			if out, expanded, _, problems := expand(around, lookup); out != s+"<A>"+s || !expanded || problems != nil {
				t.Fatalf("expand(%q) = %q, %v, %v; want %q", around, out, expanded, problems, s+"<A>"+s)
			}
		}

		// A default without "}" or "${" is used as written when the
		// variable is unset, and ignored when it is set.
		if !strings.ContainsRune(s, '}') && !strings.Contains(s, "${") {
			if out, expanded, _, problems := expand("${UNSET:-"+s+"}", lookup); out != s || !expanded || problems != nil {
				t.Fatalf("expand(${UNSET:-%s}) = %q, %v, %v; want the default", s, out, expanded, problems)
			}
			if out, _, _, problems := expand("${SET:-"+s+"}", lookup); out != "<SET>" || problems != nil {
				t.Fatalf("expand(${SET:-%s}) = %q, %v; want the value", s, out, problems)
			}
		}
	})
}

// FuzzLoadData: no input makes loading panic; a failure is always a
// ValidationError; a config that loads prints (yaml.Marshal, what config
// show prints) as a config that loads back to the same configuration. The
// corpus is in testdata/fuzz/FuzzLoadData.
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
		"plugins: {p: {config: {literal: \"$${NOT_A_VAR}\", filled: \"${V}\"}}}\n",
		"plugins: {p: {max_outstanding_polls: 2, schedules: [{every: 5m, payload: {token: \"${V}\"}}, " +
			"{id: n, cron: '30 2 * * 1-5', timezone: Europe/Berlin, not_on: [sat, 0], only_between: '01:00-05:00', jitter: 1m}, " +
			"{id: o, at: 2026-12-01T09:00:00.5+01:00, preferred_window: ['22:00-02:00', '8:30-24:00']}, " +
			"{id: w, after: 0s, command: h, catch_up: run_all, if_running: queue}, {id: d, every: 1d12h}]}}\n",
	} {
		f.Add(s)
	}
	lookup := func(string) (string, bool) { return "v", true }
	const path = "/nonexistent/config.yaml"
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "include") {
			t.Skip("includes read the file system")
		}
		c, err := loadData(path, []byte(s), fileStat{}, lookup)
		if err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			return
		}
		want, err := c.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		_ = c.Redacted()

		printed, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("print as YAML: %v", err)
		}
		back, err := loadData(path, printed, fileStat{}, lookup)
		if err != nil {
			t.Fatalf("the printed config does not load: %v\nloaded from:\n%s\nprinted:\n%s", err, s, printed)
		}
		got, err := back.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal the reloaded config: %v", err)
		}
		if string(got) != string(want) {
			t.Fatalf("the printed config loads back differently\nloaded from:\n%s\nprinted:\n%s\nfirst:  %s\nreloaded: %s", s, printed, want, got)
		}
	})
}

// FuzzRedactString: redacting is idempotent, and a URL's password never
// survives whatever surrounds it.
func FuzzRedactString(f *testing.F) {
	for _, s := range []string{"", "postgres://app:s3cret@db/app", "u:p@h", "a=b password=c", "x://@", "://u:p@", "é://u:p@h", "https://[::1]:80/@", "k=' unterminated"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, s, password string) {
		once := RedactString(s)
		if twice := RedactString(once); twice != once {
			t.Fatalf("RedactString(%q) = %q, again = %q", s, once, twice)
		}
		if password == "" || strings.ContainsAny(password, "@/?#\"'<> \t\n\v\f\r\u0085\u00a0") || !utf8.ValidString(password) {
			return
		}
		u := s + " https://user:" + password + "@host.example/x " + s
		if out := RedactString(u); strings.Contains(out, "user:"+password+"@") {
			t.Fatalf("RedactString(%q) = %q keeps the password", u, out)
		}
	})
}
