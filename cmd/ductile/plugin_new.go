package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"text/template"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
)

// pluginTemplates are the files `plugin new` writes, one folder per
// language, plus the README both share; each is a text/template of
// scaffold.
//
//go:embed plugin_new
var pluginTemplates embed.FS

// scaffold is what the templates of a new plugin are filled with.
type scaffold struct {
	Name, Lang, LangName  string
	Entrypoint, SDK, Test string
	TestCommand           string
	executables           []string // files written with the executable bit
}

// scaffolds are the languages `plugin new --lang` knows.
var scaffolds = map[string]scaffold{
	"sh": {Lang: "sh", LangName: "POSIX sh", Entrypoint: "run.sh", SDK: "ductile.sh", Test: "test.sh",
		TestCommand: "./test.sh", executables: []string{"run.sh", "test.sh"}},
	"python": {Lang: "python", LangName: "Python 3", Entrypoint: "run.py", SDK: "ductile.py", Test: "test_plugin.py",
		TestCommand: "python3 test_plugin.py", executables: []string{"run.py"}},
}

// pluginNewCommand is `plugin new`.
func pluginNewCommand() *cli.Command {
	return &cli.Command{
		Name:      "new",
		Usage:     "write a new plugin's folder: manifest, an entrypoint using the SDK, a test and a README",
		ArgsUsage: "NAME",
		Description: "Writes DIR/NAME/ (DIR: the current directory unless --dir) with manifest.yaml, the\n" +
			"entrypoint (run.sh or run.py) answering a handle command, a copy of the language's SDK\n" +
			"beside it, a test that runs the entrypoint through the protocol (test.sh, or\n" +
			"test_plugin.py run with python3) and a README. It passes its own test and config check\n" +
			"as it is: add DIR to plugin_roots. NAME: a letter or digit, then letters, digits, _ . -\n" +
			"(the manifest's rule). An existing DIR/NAME is never touched (exit 1).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lang", Usage: "the entrypoint's `LANGUAGE`: sh or python"},
			&cli.StringFlag{Name: "dir", Value: ".", Usage: "write the plugin's folder in `DIR` (made if missing), a plugin root"},
			dryRunFlag(), jsonFlag(),
		},
		Action: pluginNew,
	}
}

// pluginNewOutput is what plugin new prints with --json.
type pluginNewOutput struct {
	Name   string   `json:"name"`
	Lang   string   `json:"lang"`
	Dir    string   `json:"dir"`   // the plugin's folder, absolute
	Root   string   `json:"root"`  // its parent, the plugin root to add to plugin_roots
	Files  []string `json:"files"` // written (or, with --dry-run, that would be)
	Test   string   `json:"test"`  // the command that runs its test, in Dir
	DryRun bool     `json:"dry_run"`
}

func pluginNew(c *cli.Context) error {
	name, lang := c.Args().First(), c.String("lang")
	s, ok := scaffolds[lang]
	switch {
	case lang == "":
		return usagef("plugin new needs --lang sh or --lang python (see: ductile plugin new --help)")
	case !ok:
		return usagef("--lang must be sh or python, got %q", lang)
	}
	s.Name = name
	files, err := renderScaffold(s)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(c.String("dir"))
	if err != nil {
		return failf("plugin new: %v", err)
	}
	dir := filepath.Join(root, name)
	if _, err := os.Lstat(dir); err == nil {
		return hintf(errcode.Conflict, "choose another NAME or --dir, or remove it first",
			"%s already exists: plugin new never writes into an existing folder", dir)
	}
	out := pluginNewOutput{Name: name, Lang: lang, Dir: dir, Root: root, Test: s.TestCommand, DryRun: c.Bool("dry-run")}
	for _, f := range files {
		out.Files = append(out.Files, f.name)
	}
	if !out.DryRun {
		if err := writeScaffold(root, dir, files); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, out)
	}
	w := c.App.Writer
	verb := "wrote"
	if out.DryRun {
		verb = "would write (dry run)"
	}
	fmt.Fprintf(w, "%s plugin %s (%s) in %s:\n", verb, name, lang, dir)
	for _, f := range out.Files {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintf(w, "next: cd %s && %s\n", dir, s.TestCommand)
	fmt.Fprintf(w, "      add %s to plugin_roots, then: ductile config check; ductile plugin run %s --payload '{\"name\":\"Ada\"}'\n", root, name)
	return nil
}

// scaffoldFile is one file of a new plugin.
type scaffoldFile struct {
	name string
	data []byte
	mode fs.FileMode
}

// renderScaffold fills the templates of s.Lang with s and adds the SDK; a
// NAME the manifest would refuse is a usage error.
func renderScaffold(s scaffold) ([]scaffoldFile, error) {
	var files []scaffoldFile
	render := func(src, name string) error {
		text, err := pluginTemplates.ReadFile(src)
		if err != nil {
			return err
		}
		t, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, s); err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		for _, x := range s.executables {
			if x == name {
				mode = 0o755
			}
		}
		files = append(files, scaffoldFile{name, b.Bytes(), mode})
		return nil
	}
	entries, err := pluginTemplates.ReadDir(path.Join("plugin_new", s.Lang))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := render(path.Join("plugin_new", s.Lang, e.Name()), e.Name()); err != nil {
			return nil, fmt.Errorf("plugin new: template %s: %w", e.Name(), err)
		}
	}
	if err := render("plugin_new/README.md", "README.md"); err != nil {
		return nil, fmt.Errorf("plugin new: template README.md: %w", err)
	}
	// The manifest is checked by discovery's own rules before anything is
	// written: a NAME it refuses is refused here.
	for _, f := range files {
		if f.name != pluginhost.ManifestFile {
			continue
		}
		m, err := pluginhost.ParseManifest(f.data)
		if err == nil {
			err = m.Validate()
		}
		if err != nil || m.Name != s.Name {
			return nil, hintf(errcode.InvalidInput, "NAME: a letter or digit, then letters, digits, _ . or - (e.g. my-plugin)",
				"%q is not a plugin name", s.Name)
		}
	}
	sdk, err := plugins.SDK(s.SDK)
	if err != nil {
		return nil, err
	}
	return append(files, scaffoldFile{s.SDK, sdk, 0o644}), nil
}

// writeScaffold makes root if missing, then dir (which must not exist) with
// files; on a failure it removes dir again, so nothing half-made is left.
func writeScaffold(root, dir string, files []scaffoldFile) (err error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return failf("plugin new: make --dir: %v", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return hintf(errcode.Conflict, "choose another NAME or --dir, or remove it first",
				"%s already exists: plugin new never writes into an existing folder", dir)
		}
		return failf("plugin new: %v", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return failf("plugin new: %v", err)
		}
		// The umask may have taken bits off: discovery wants the
		// entrypoint executable and nothing world-writable.
		if err := os.Chmod(p, f.mode); err != nil {
			return failf("plugin new: %v", err)
		}
	}
	return nil
}
