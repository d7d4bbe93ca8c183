package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Config integrity (spec §13.2): ductile config lock writes .checksums
// beside the config file, the BLAKE3 hash of every file the config loads
// (scopes files included), one "<hex>  <path>" line each as b3sum writes
// them (paths relative to the config directory), so b3sum --check can
// verify it too. Load verifies the files it lists: a changed or unlisted
// high-security file (one holding tokens:, secrets: or webhooks:, or a
// scopes file) fails the load; any other changed or unlisted file is an
// IntegrityWarning. A config that loads a high-security file must have a
// .checksums: without one the load fails (run ductile config lock); a
// config with none has nothing to verify.
//
// Permissions (spec §13.2: config and lock files 0600, relaxed only on
// purpose): a high-security file or .checksums that another user owns, or
// that a group or others may write, fails the load, since whoever can
// write it can add a token; so does a directory between it and the config
// directory that another user owns or that a group or others may write
// (unless sticky, like /tmp), since whoever can write the directory can
// rename their own file in place. The owner and mode are those of the
// descriptor read (permissions.go). A file a group or others may read is
// an IntegrityWarning.

// ChecksumsName is the name of the checksums file beside the config file.
const ChecksumsName = ".checksums"

// ChecksumsPath is the checksums file of the config at c.Source.
func (c *Config) ChecksumsPath() string { return filepath.Join(c.Dir, ChecksumsName) }

// How a load treats .checksums (the files' owners and permissions are
// checked in every mode: lock never records a file Load would refuse).
type checksumsMode int

const (
	// requireChecksums: Load, for a start or a reload.
	requireChecksums checksumsMode = iota
	// checksumsIfPresent: LoadUnlocked, for token create and revoke, which
	// write a .checksums when there is none.
	checksumsIfPresent
	// ignoreChecksums: LoadUnverified, for config lock, which writes it.
	ignoreChecksums
)

// LoadUnverified loads like LoadDeferred but does not verify .checksums:
// for ductile config lock, which writes .checksums.
func LoadUnverified(path string) (*Config, error) { return load(path, ignoreChecksums, true) }

// LoadUnlocked loads like LoadDeferred, but a config without .checksums is
// not refused for its high-security files: for the commands that write one
// when there is none (ductile config token create and revoke, then Lock).
func LoadUnlocked(path string) (*Config, error) { return load(path, checksumsIfPresent, true) }

// LoadDeferred loads like Load, except that a ${VAR} whose variable is not
// set is left as written and listed by Config.Unset instead of refusing the
// config (but for state_dir, plugin_roots and include, which every command
// needs): for the CLI, which uses few of the values (a running daemon
// resolves the rest in its own environment). What uses a value checks that
// it resolved: Config.UnsetFor.
func LoadDeferred(path string) (*Config, error) { return load(path, requireChecksums, true) }

// load reads the config at path as mode and deferEnv say (Examine), and
// refuses it for any problem found: a *ValidationError.
func load(path string, mode checksumsMode, deferEnv bool) (*Config, error) {
	cfg, errs, err := examine(path, mode, deferEnv)
	switch {
	case err != nil:
		return nil, err
	case len(errs) > 0:
		return nil, &ValidationError{Errors: errs}
	}
	return cfg, nil
}

// Examine loads the config at path as Load does (LoadDeferred with
// deferEnv) and returns every problem that would refuse it together, the
// files' own (YAML, keys, values) and those of their integrity and
// permissions, rather than only the first kind found: config check and a
// reload report them all in one run. cfg is the config when only its
// integrity or permissions refuse it (so that a check can go on to the
// plugins), nil when the files do not decode. err is set only for a config
// file that cannot be read at all.
func Examine(path string, deferEnv bool) (cfg *Config, errs []FieldError, err error) {
	return examine(path, requireChecksums, deferEnv)
}

// examine reads the config at path and its includes, then checks the
// high-security files' permissions and, as mode says, .checksums (read
// once): errs for what refuses the config, the rest in IntegrityWarnings.
func examine(path string, mode checksumsMode, deferEnv bool) (*Config, []FieldError, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load config: %w", err)
	}
	data, st, err := readConfigFile(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("load config: %w", err)
	}
	cfg, decodeErrs := decodeFiles(abs, data, st, os.LookupEnv, deferEnv)
	trustErrs, warnings := cfg.trustProblems(mode)
	errs := append(decodeErrs, trustErrs...)
	switch {
	case len(decodeErrs) > 0:
		return nil, errs, nil
	case len(errs) > 0:
		return cfg, errs, nil
	}
	cfg.IntegrityWarnings = warnings
	return cfg, nil, nil
}

// trustProblems checks the permissions of c's high-security files and, as
// mode says, .checksums: errors refuse the config, warnings do not.
func (c *Config) trustProblems(mode checksumsMode) (errs, warnings []FieldError) {
	sums, err := readChecksumsFile(c.ChecksumsPath())
	if err != nil {
		return []FieldError{{File: ChecksumsName, Msg: err.Error()}}, nil
	}
	errs, warnings = c.permissionProblems(sums, effectiveUID())
	if mode == requireChecksums || mode == checksumsIfPresent && sums.exists {
		sumErrs, sumWarnings, err := c.integrityProblems(sums)
		if err != nil {
			return append(errs, FieldError{File: ChecksumsName, Msg: err.Error()}), warnings
		}
		errs, warnings = append(errs, sumErrs...), append(warnings, sumWarnings...)
	}
	return errs, warnings
}

// Checksums lists every file c was loaded from with its hash as read: the
// config files in load order, then each token's scopes file.
func (c *Config) Checksums() []FileHash {
	out := slices.Clone(c.FileHashes)
	for _, t := range c.Tokens {
		if !slices.ContainsFunc(out, func(f FileHash) bool { return f.Path == t.ScopesFile }) {
			out = append(out, FileHash{Path: t.ScopesFile, BLAKE3: t.ScopesHash})
		}
	}
	return out
}

// HighSecurity reports whether a change to the file at path refuses a
// start or reload: it holds tokens:, secrets: or webhooks:, or is a
// token's scopes file.
func (c *Config) HighSecurity(path string) bool {
	for _, key := range c.fileKeys[path] {
		if key == "tokens" || key == "secrets" || key == "webhooks" {
			return true
		}
	}
	return slices.ContainsFunc(c.Tokens, func(t Token) bool { return t.ScopesFile == path })
}

// WriteChecksums writes files to the checksums file at path (paths shown
// relative to dir), replacing it atomically, mode 0600.
func WriteChecksums(path, dir string, files []FileHash) error {
	var b bytes.Buffer
	for _, f := range files {
		fmt.Fprintf(&b, "%s  %s\n", strings.TrimPrefix(f.BLAKE3, "blake3:"), displayPath(dir, f.Path))
	}
	if err := writeFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("write checksums: %w", err)
	}
	return nil
}

// ReadChecksums reads the checksums file at path: absolute file path →
// "blake3:<hex>", in the order listed. A missing file gives nil, nil.
func ReadChecksums(path, dir string) ([]FileHash, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parseChecksums(path, dir, data)
}

// parseChecksums parses data, the content of the checksums file at path.
func parseChecksums(path, dir string, data []byte) ([]FileHash, error) {
	var out []FileHash
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		sum, file, ok := strings.Cut(text, "  ")
		if !ok || !hashPattern.MatchString("blake3:"+sum) || file == "" {
			return nil, fmt.Errorf("%s:%d: not \"<blake3 hex>  <path>\": run ductile config lock to write it again", path, line)
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		out = append(out, FileHash{Path: filepath.Clean(file), BLAKE3: "blake3:" + sum})
	}
	return out, sc.Err()
}

// UpdateChecksums sets the entries of paths in the checksums file at
// path to the files' current hashes (dropping those no longer there),
// leaving the others as they are. It does nothing when there is no
// checksums file, and reports whether there was one.
func UpdateChecksums(path, dir string, paths ...string) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	listed, err := ReadChecksums(path, dir)
	if err != nil {
		return true, err
	}
	for _, p := range paths {
		i := slices.IndexFunc(listed, func(f FileHash) bool { return f.Path == p })
		data, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if i >= 0 {
				listed = slices.Delete(listed, i, i+1)
			}
		case err != nil:
			return true, fmt.Errorf("update checksums: %w", err)
		case i >= 0:
			listed[i].BLAKE3 = HashBytes(data)
		default:
			listed = append(listed, FileHash{Path: p, BLAKE3: HashBytes(data)})
		}
	}
	return true, WriteChecksums(path, dir, listed)
}

// IntegrityProblems compares c's files with the checksums file: errors for
// high-security files that changed or are not listed, warnings for the
// others. Without a checksums file, each high-security file is an error
// (ductile config lock writes one) and there is nothing else to compare.
func (c *Config) IntegrityProblems() (errs, warnings []FieldError, err error) {
	sums, err := readChecksumsFile(c.ChecksumsPath())
	if err != nil {
		return nil, nil, err
	}
	return c.integrityProblems(sums)
}

// integrityProblems is IntegrityProblems against sums, .checksums as read.
func (c *Config) integrityProblems(sums checksumsFile) (errs, warnings []FieldError, err error) {
	if !sums.exists {
		for _, f := range c.Checksums() {
			if c.HighSecurity(f.Path) {
				errs = append(errs, FieldError{File: displayPath(c.Dir, f.Path), Msg: fmt.Sprintf(
					"holds tokens, secrets, scopes or webhooks, and there is no %s to check it against: record the files' hashes with ductile config lock --config %s (once; token create and revoke keep it current)",
					ChecksumsName, c.Source)})
			}
		}
		return errs, nil, nil
	}
	listed, err := parseChecksums(c.ChecksumsPath(), c.Dir, sums.data)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range c.Checksums() {
		name := displayPath(c.Dir, f.Path)
		i := slices.IndexFunc(listed, func(l FileHash) bool { return l.Path == f.Path })
		var fe FieldError
		switch {
		case i < 0:
			fe = FieldError{File: name, Msg: fmt.Sprintf("not listed in %s: run ductile config lock to record it", ChecksumsName)}
		case listed[i].BLAKE3 != f.BLAKE3:
			fe = FieldError{File: name, Msg: fmt.Sprintf("changed since ductile config lock (%s has %s, the file hashes to %s): if the change is yours, run ductile config lock; if not, restore the file", ChecksumsName, listed[i].BLAKE3, f.BLAKE3)}
		default:
			continue
		}
		if c.HighSecurity(f.Path) {
			fe.Msg += " (it holds tokens, secrets, scopes or webhooks: the config is refused until then)"
			errs = append(errs, fe)
		} else {
			warnings = append(warnings, fe)
		}
	}
	return errs, warnings, nil
}

// who names the classes of users whose bit is set in mode's group (0o010)
// and other (0o001) triplets, shifted to the execute position.
func who(mode fs.FileMode) string {
	switch {
	case mode&0o010 != 0 && mode&0o001 != 0:
		return "its group and others"
	case mode&0o010 != 0:
		return "its group"
	}
	return "others"
}

// Lock writes .checksums for the config at path as it is now, every file it
// loads (what ductile config lock writes), and returns the config and the
// files recorded.
func Lock(path string) (*Config, []FileHash, error) {
	cfg, err := LoadUnverified(path)
	if err != nil {
		return nil, nil, err
	}
	files := cfg.Checksums()
	if err := WriteChecksums(cfg.ChecksumsPath(), cfg.Dir, files); err != nil {
		return nil, nil, err
	}
	return cfg, files, nil
}
