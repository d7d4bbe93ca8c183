package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// userDocs are the README and every docs/*.md, by path from the
// repository's root, with their text.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	paths = append(paths, "../../README.md")
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[strings.TrimPrefix(p, "../../")] = string(b)
	}
	return out
}

// commandLines are the command lines the text shows: every inline code
// span that starts with "ductile ", and every line of a fenced block that
// does (after a "$ " prompt), with the line each starts on.
func commandLines(text string) map[string]int {
	out := map[string]int{}
	inBlock := false
	span := regexp.MustCompile("`(ductile [^`]+)`")
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			l := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasPrefix(l, "ductile ") {
				out[l] = i + 1
			}
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			out[m[1]] = i + 1
		}
	}
	return out
}

// globalFlagsWithValue are the app's global flags that take a value.
var globalFlagsWithValue = []string{"--config", "-c", "--state-dir", "--log-format"}

// checkCommandLine says what of line the CLI does not have ("" when it
// has it all): after "ductile" and any global flags, each lower-case word
// names a subcommand while the command it reached has subcommands (an
// upper-case word, NOUN or NAME, is a placeholder and ends the path), and
// each --flag is one of the app's or of a command on the path, once
// normalizeArgs has moved it where the CLI parses it.
func checkCommandLine(app *cli.App, line string) string {
	// Flags go anywhere: reorder them as the CLI does before it parses.
	words := normalizeArgs(app, strings.Fields(line))[1:]
	cmds := app.Commands
	flags := flagNames(app.Flags)
	path := "ductile"
	var noun *cli.Command // the command reached, when it has subcommands
	done := false         // the path ended: the words left are arguments
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "--") && len(w) > 2 {
			name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			name = strings.TrimRight(name, ".,;:)`'\"")
			if !slices.Contains(flags, name) && name != "help" && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(name) {
				return path + " has no flag --" + name
			}
			if slices.Contains(globalFlagsWithValue, "--"+name) && !strings.Contains(w, "=") {
				i++ // its value
			}
			continue
		}
		if done || strings.HasPrefix(w, "-") {
			continue
		}
		if len(cmds) == 0 || !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
			done = true
			continue
		}
		var found *cli.Command
		for _, c := range cmds {
			if c.Name == w || slices.Contains(c.Aliases, w) {
				found = c
			}
		}
		if found == nil {
			if w == "help" {
				return ""
			}
			if actsItself(noun) { // ductile run PLUGIN
				done = true
				continue
			}
			return path + " has no command " + w
		}
		path += " " + w
		cmds, noun = found.Subcommands, found
		flags = append(flags, flagNames(found.Flags)...)
	}
	return ""
}

// flagNames are the names and aliases of flags.
func flagNames(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		out = append(out, f.Names()...)
	}
	return out
}

// TestDocsNameOnlyCommandsTheCLIHas: every `ductile NOUN ACTION …` the user
// docs and the README show is a command the CLI has (issue 20 item 26).
func TestDocsNameOnlyCommandsTheCLIHas(t *testing.T) {
	t.Parallel()
	app := newApp(io.Discard, io.Discard)
	app.Commands = append(app.Commands, &cli.Command{Name: "help", Flags: []cli.Flag{jsonFlag()}}) // help [NOUN [ACTION]] [--json]
	var problems []string
	checked := 0
	for path, text := range userDocs(t) {
		for line, n := range commandLines(text) {
			checked++
			if p := checkCommandLine(app, line); p != "" {
				problems = append(problems, path+":"+strconv.Itoa(n)+": `"+line+"`: "+p)
			}
		}
	}
	slices.Sort(problems)
	require.Greater(t, checked, 100, "the docs show command lines")
	require.Empty(t, problems, "commands the docs name but the CLI does not have")
}

// TestDocsCiteOnlyTestsThatExist: every Test…, Benchmark…, Fuzz… and
// Example… name docs/architecture.md (and the other user docs) cite is a
// function of a _test.go file of the repository (issue 20 item 26).
func TestDocsCiteOnlyTestsThatExist(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, defined["TestDocsCiteOnlyTestsThatExist"])
	cited := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z]\w*)`)
	var missing []string
	for path, text := range userDocs(t) {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range cited.FindAllStringSubmatch(line, -1) {
				if !defined[m[1]] {
					missing = append(missing, path+":"+strconv.Itoa(i+1)+": "+m[1])
				}
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "tests the docs cite that no _test.go file defines")
}

// TestDocsLinksResolve: every relative link of the user docs and the
// README names a file that exists, and a #fragment of a Markdown file one
// of its headings (as GitHub makes their anchors).
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	docs := userDocs(t)
	anchors := map[string]map[string]bool{}
	fence := regexp.MustCompile("(?s)```.*?```")
	heading := regexp.MustCompile(`(?m)^#+\s+(.*)$`)
	for path, text := range docs {
		anchors[path] = map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			slug := strings.ToLower(strings.TrimSpace(m[1]))
			slug = regexp.MustCompile(`[^\w\- ]`).ReplaceAllString(slug, "")
			anchors[path][strings.ReplaceAll(slug, " ", "-")] = true
		}
	}
	link := regexp.MustCompile(`\]\(([^)\s:]*?)(?:#([^)\s]+))?\)`)
	var broken []string
	for path, text := range docs {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := path
				if m[1] != "" {
					target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(path), m[1])))
					if _, err := os.Stat("../../" + target); err != nil {
						broken = append(broken, path+":"+strconv.Itoa(i+1)+": "+m[1]+": no such file")
						continue
					}
				}
				if m[2] != "" && anchors[target] != nil && !anchors[target][m[2]] {
					broken = append(broken, path+":"+strconv.Itoa(i+1)+": #"+m[2]+": no such heading in "+target)
				}
			}
		}
	}
	slices.Sort(broken)
	require.Empty(t, broken)
}

// TestDocsListEveryErrorCode: the README and docs/architecture.md list
// every code a CLI error may carry (scripts test them): each code of
// package errcode the CLI uses.
func TestDocsListEveryErrorCode(t *testing.T) {
	t.Parallel()
	list, err := os.ReadFile("../../errcode/errcode.go")
	require.NoError(t, err)
	values := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+) Code = "(\w+)"`).FindAllStringSubmatch(string(list), -1) {
		values[m[1]] = m[2]
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	used := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`errcode\.([A-Z]\w*)`).FindAllStringSubmatch(string(src), -1) {
			if m[1] != "Code" {
				require.Contains(t, values, m[1], "%s uses errcode.%s", f, m[1])
				used[values[m[1]]] = true
			}
		}
	}
	require.GreaterOrEqual(t, len(used), 8)
	docs := userDocs(t)
	for _, path := range []string{"README.md", "docs/architecture.md"} {
		for c := range used {
			require.True(t, strings.Contains(docs[path], "`"+c+"`"), "%s lists the error code %s", path, c)
		}
	}
}

// TestDocsCiteCodeThatExists: every file of the repository the docs cite
// (`dispatch/runner.go`) exists, and the identifiers cited right after it
// (`dispatch/runner.go` `runnable`, `work`) are declared in it (a query
// name, for a .sql file).
func TestDocsCiteCodeThatExists(t *testing.T) {
	t.Parallel()
	cite := regexp.MustCompile("`((?:[\\w.-]+/)+[\\w.-]+\\.(?:go|sql))`((?:,? `[A-Za-z_][\\w.]*`)*)")
	ident := regexp.MustCompile("`([A-Za-z_][\\w.]*)`")
	var problems []string
	for path, text := range userDocs(t) {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range cite.FindAllStringSubmatch(line, -1) {
				at := path + ":" + strconv.Itoa(i+1) + ": " + m[1]
				src, err := os.ReadFile("../../" + m[1])
				if err != nil {
					problems = append(problems, at+": no such file")
					continue
				}
				for _, id := range ident.FindAllStringSubmatch(m[2], -1) {
					name := id[1][strings.LastIndex(id[1], ".")+1:]
					decl := `(?m)^func (\([^)]*\) )?` + name + `\b|^type ` + name + `\b|^\s*` + name + `\s*(=|[A-Za-z*\[(])|^(var|const) ` + name + `\b`
					if strings.HasSuffix(m[1], ".sql") {
						decl = `name: ` + name + `\b`
					}
					if !regexp.MustCompile(decl).Match(src) {
						problems = append(problems, at+": declares no "+id[1])
					}
				}
			}
		}
	}
	slices.Sort(problems)
	require.Empty(t, problems)
}
