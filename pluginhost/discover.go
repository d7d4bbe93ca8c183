package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Discovery errors. Every error Discover returns for a plugin is a
// *PluginError wrapping one of these (or ErrInvalidManifest).
var (
	// ErrUntrusted: the plugin breaks a trust rule (symlink escape,
	// world-writable directory or manifest, entrypoint not an executable
	// regular file).
	ErrUntrusted = errors.New("untrusted plugin")
	// ErrMissingConfig: a config_keys.required key is absent from the
	// plugin's config.
	ErrMissingConfig = errors.New("missing required config")
	// ErrShadowed: a plugin of the same name was already loaded from an
	// earlier root (or earlier directory of the same root).
	ErrShadowed = errors.New("plugin shadowed")
)

// DiscoverOptions tunes Discover.
type DiscoverOptions struct {
	// AllowSymlinks permits symlinks that resolve outside every approved
	// root (service.allow_symlinks). Symlinks are always logged at WARN.
	AllowSymlinks bool
	// Config is the operator's plugin config keyed by plugin name; it is
	// checked against each manifest's config_keys.required.
	Config map[string]map[string]any
	// ConfigElsewhere skips that check: the plugins' config is not known
	// here (a remote worker gets it with each claim; the daemon's config
	// check does it).
	ConfigElsewhere bool
	// Logger receives warnings (symlinks). Nil discards them.
	Logger *slog.Logger
}

// PluginError is why one plugin directory was not loaded.
type PluginError struct {
	Name string // manifest name, or the directory name when unknown
	Dir  string
	Err  error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin %q (%s): %v", e.Name, e.Dir, e.Err)
}

func (e *PluginError) Unwrap() error { return e.Err }

// kindError is a message that matches a sentinel with errors.Is without
// repeating the sentinel's text.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func kindErrorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Plugin is a discovered, validated plugin.
type Plugin struct {
	Name       string
	Dir        string // absolute, symlinks resolved; the working directory of every run
	Entrypoint string // absolute path of the executable: Dir joined with Manifest.Entrypoint
	Manifest   *Manifest
	// Step, if set, runs the plugin's commands in this process instead of
	// spawning Entrypoint (ductile bench --in-process: the core's cost apart
	// from process spawning).
	Step Step
}

// A Step is a plugin command run in process: it gets the request line a
// process would read on stdin and returns what the process would print on
// stdout, or an error standing for a failed exit.
type Step func(ctx context.Context, request []byte) (stdout []byte, err error)

// Command returns the manifest's command named name.
func (p *Plugin) Command(name string) (CommandSpec, bool) {
	if p.Manifest == nil {
		return CommandSpec{}, false
	}
	return p.Manifest.Command(name)
}

// Registry holds the loaded plugins by name, and the plugins Discover
// skipped with the reason. It is read-only after Discover and safe for
// concurrent use.
type Registry struct {
	byName  map[string]*Plugin
	sorted  []*Plugin
	skipped []*PluginError // in discovery order
}

// Get returns the plugin named name.
func (r *Registry) Get(name string) (*Plugin, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// List returns the plugins sorted by name. The slice is a copy.
func (r *Registry) List() []*Plugin {
	return slices.Clone(r.sorted)
}

// Skipped returns the plugin directories Discover did not load, each with
// the reason (a shadowed plugin's name is also loaded, from an earlier root).
// The slice is a copy.
func (r *Registry) Skipped() []*PluginError {
	return slices.Clone(r.skipped)
}

// Discover scans each root's immediate subdirectories that contain a
// manifest.yaml, in root order (directories within a root by name), and loads
// every plugin that passes validation. It returns the registry (never nil) and
// one error per root or plugin that was skipped; a bad plugin does not stop
// the others. On a duplicate name the first plugin wins and each later one is
// reported with ErrShadowed.
func Discover(roots []string, opts DiscoverOptions) (*Registry, []error) {
	d := discoverer{opts: opts, log: opts.Logger}
	if d.log == nil {
		d.log = noLogger()
	}
	reg := &Registry{byName: map[string]*Plugin{}}
	var errs []error

	type root struct{ given, real string }
	var good []root
	for _, r := range roots {
		real, err := resolveRoot(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin root %s: %w", r, err))
			continue
		}
		good = append(good, root{r, real})
		d.approved = append(d.approved, real)
	}

	for _, r := range good {
		entries, err := os.ReadDir(r.real)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin root %s: %w", r.given, err))
			continue
		}
		pins, err := readRootPins(r.real)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin root %s: %w", r.given, err))
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p, err := d.load(filepath.Join(r.real, e.Name()))
			if err == nil && p != nil {
				if perr := pins.check(e.Name(), p.Dir); perr != nil {
					p, err = nil, &PluginError{Name: p.Name, Dir: p.Dir, Err: perr}
				}
			}
			if err != nil {
				errs = append(errs, err)
				var pe *PluginError
				if errors.As(err, &pe) {
					reg.skipped = append(reg.skipped, pe)
				}
				continue
			}
			if p == nil {
				continue // not a plugin directory
			}
			if first, dup := reg.byName[p.Name]; dup {
				pe := &PluginError{Name: p.Name, Dir: p.Dir,
					Err: kindErrorf(ErrShadowed, "shadowed by %s (the first root wins)", first.Dir)}
				errs = append(errs, pe)
				reg.skipped = append(reg.skipped, pe)
				continue
			}
			reg.byName[p.Name] = p
			reg.sorted = append(reg.sorted, p)
		}
	}
	slices.SortFunc(reg.sorted, func(a, b *Plugin) int { return strings.Compare(a.Name, b.Name) })
	return reg, errs
}

func resolveRoot(r string) (string, error) {
	abs, err := filepath.Abs(r)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errors.New("not a directory")
	}
	if worldWritable(fi) {
		return "", kindErrorf(ErrUntrusted, "root %s is world-writable (mode %v): chmod o-w %s", real, fi.Mode().Perm(), real)
	}
	return real, nil
}

type discoverer struct {
	opts     DiscoverOptions
	log      *slog.Logger
	approved []string // resolved roots
}

// load validates the directory at path (an entry of a resolved root). It
// returns nil, nil when path is not a plugin directory.
func (d *discoverer) load(path string) (*Plugin, error) {
	name, dir := filepath.Base(path), path
	fail := func(err error) (*Plugin, error) {
		return nil, &PluginError{Name: name, Dir: dir, Err: err}
	}

	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, nil // dangling link: not a plugin directory
		}
		if !isDir(real) || !exists(filepath.Join(real, ManifestFile)) {
			return nil, nil
		}
		if err := d.checkLink("plugin directory", path, real); err != nil {
			return fail(err)
		}
		dir = real // from here on errors name the resolved directory
	} else if !fi.IsDir() {
		return nil, nil
	}

	mpath := filepath.Join(dir, ManifestFile)
	mfi, err := os.Lstat(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return fail(err)
	}

	dfi, err := os.Stat(dir)
	if err != nil {
		return fail(err)
	}
	if worldWritable(dfi) {
		return fail(kindErrorf(ErrUntrusted, "directory is world-writable (mode %v): chmod o-w %s", dfi.Mode().Perm(), dir))
	}

	realManifest := mpath
	if mfi.Mode()&fs.ModeSymlink != 0 {
		if realManifest, err = filepath.EvalSymlinks(mpath); err != nil {
			return fail(fmt.Errorf("%s: %w", ManifestFile, err))
		}
		if err := d.checkLink(ManifestFile, mpath, realManifest); err != nil {
			return fail(err)
		}
		if mfi, err = os.Stat(realManifest); err != nil {
			return fail(fmt.Errorf("%s: %w", ManifestFile, err))
		}
	} else if !mfi.Mode().IsRegular() {
		return fail(fmt.Errorf("%s is not a regular file", ManifestFile))
	}
	// Anyone may rewrite a world-writable manifest, and with it the
	// entrypoint it names: refused like a world-writable directory.
	if worldWritable(mfi) {
		return fail(kindErrorf(ErrUntrusted, "%s is world-writable (mode %v): chmod o-w %s", ManifestFile, mfi.Mode().Perm(), realManifest))
	}
	m, err := LoadManifest(mpath)
	if err != nil {
		return fail(err)
	}
	name = m.Name

	ep := filepath.Join(dir, filepath.FromSlash(m.Entrypoint))
	if err := d.checkEntrypoint(m.Entrypoint, ep); err != nil {
		return fail(err)
	}

	if missing := missingKeys(m.ConfigKeys.Required, d.opts.Config[m.Name]); len(missing) > 0 && !d.opts.ConfigElsewhere {
		return fail(kindErrorf(ErrMissingConfig, "missing required config key(s): %s (set them under plugins.%s in the config)",
			strings.Join(missing, ", "), m.Name))
	}

	return &Plugin{Name: m.Name, Dir: dir, Entrypoint: ep, Manifest: m}, nil
}

func (d *discoverer) checkEntrypoint(rel, ep string) error {
	// ep is under the resolved plugin directory, so any difference after
	// EvalSymlinks means a symlink somewhere in rel (file or subdirectory).
	target, err := filepath.EvalSymlinks(ep)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("entrypoint %s does not exist (looked for %s)", rel, ep)
	} else if err != nil {
		return fmt.Errorf("entrypoint %s: %w", rel, err)
	}
	if target != ep {
		if err := d.checkLink("entrypoint", ep, target); err != nil {
			return err
		}
	}
	return entrypointProblem(rel, ep, target)
}

// entrypointProblem checks the file an entrypoint ep (rel in its manifest)
// resolves to, target: an executable regular file no one else may write.
func entrypointProblem(rel, ep, target string) error {
	fi, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("entrypoint %s: %w", rel, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return kindErrorf(ErrUntrusted, "entrypoint %s is not a regular file", rel)
	case fi.Mode().Perm()&0o111 == 0:
		return kindErrorf(ErrUntrusted, "entrypoint %s is not executable: chmod +x %s", rel, ep)
	case worldWritable(fi):
		return kindErrorf(ErrUntrusted, "entrypoint %s is world-writable: chmod o-w %s", rel, target)
	}
	return nil
}

// Runnable checks that p's entrypoint is still what discovery accepted: an
// executable regular file no one else may write (one stat). A plugin whose
// file changed since (chmod -x, removed) is still loaded, but a job of it
// would fail to start. A plugin run in process (Step) is always runnable.
func (p *Plugin) Runnable() error {
	if p.Step != nil {
		return nil
	}
	rel := p.Entrypoint
	if p.Manifest != nil {
		rel = p.Manifest.Entrypoint
	}
	return entrypointProblem(rel, p.Entrypoint, p.Entrypoint)
}

// checkLink applies the symlink rule to a link at path resolving to real:
// always warn; refuse a target outside every approved root unless
// AllowSymlinks.
func (d *discoverer) checkLink(what, path, real string) error {
	inside := d.insideApproved(real)
	d.log.Warn("plugin path is a symlink", "what", what, "path", path, "target", real,
		"inside_roots", inside, "allow_symlinks", d.opts.AllowSymlinks)
	if !inside && !d.opts.AllowSymlinks {
		return kindErrorf(ErrUntrusted, "%s %s is a symlink to %s, outside the plugin roots (set service.allow_symlinks to permit)",
			what, path, real)
	}
	return nil
}

func (d *discoverer) insideApproved(real string) bool {
	for _, r := range d.approved {
		if rel, err := filepath.Rel(r, real); err == nil && rel != "." && rel != ".." &&
			!strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// missingKeys returns the required keys that are absent (or null) in cfg.
func missingKeys(required []string, cfg map[string]any) []string {
	var missing []string
	for _, k := range required {
		if v, ok := cfg[k]; !ok || v == nil {
			missing = append(missing, k)
		}
	}
	return missing
}

func noLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func worldWritable(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o002 != 0 }

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
