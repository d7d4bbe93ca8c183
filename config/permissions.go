package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// fileStat is the mode and owner of a file as fstat of the descriptor it
// was read from gave them, so that the file checked is the file read.
type fileStat struct {
	mode fs.FileMode
	uid  uint32
	ok   bool // the owner is known (a Unix stat)
}

// statOf takes the mode and owner out of info.
func statOf(info fs.FileInfo) fileStat {
	st := fileStat{mode: info.Mode()}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.uid, st.ok = sys.Uid, true
	}
	return st
}

// trustedOwner reports whether uid may own a high-security file or a
// directory above one: the effective user or root.
func trustedOwner(uid, euid uint32) bool { return uid == euid || uid == 0 }

// filePermissionProblem decides on a high-security file or .checksums of
// stat st, read by the user euid: refuse when another user owns it or a
// group or others may write it, warn when they may read it.
func filePermissionProblem(path string, st fileStat, euid uint32) (refuse, warn string) {
	mode := st.mode.Perm()
	switch {
	case st.ok && !trustedOwner(st.uid, euid):
		return fmt.Sprintf("is owned by user %d, not by the user ductile runs as (%d) or root: whoever owns it can add a token or change what the config trusts; if it is yours, run chown %d %s", st.uid, euid, euid, path), ""
	case mode&0o022 != 0:
		return fmt.Sprintf("may be written by %s (mode %04o): whoever can write it can add a token or change what the config trusts; run chmod 600 %s",
			who(mode>>1), mode, path), ""
	case mode&0o044 != 0:
		return "", fmt.Sprintf("may be read by %s (mode %04o): it names tokens, secrets or hashes; run chmod 600 %s, or leave it if the sharing is intended (only a warning)",
			who(mode>>2), mode, path)
	}
	return "", ""
}

// dirPermissionProblem decides on a directory above a high-security file:
// refuse when another user owns it, or when a group or others may write
// it (and so rename another file in place of the one read), unless it is
// sticky (only a file's owner may rename it there) and owned by euid or
// root, like /tmp.
func dirPermissionProblem(dir string, st fileStat, euid uint32) string {
	mode := st.mode.Perm()
	switch {
	case st.ok && !trustedOwner(st.uid, euid):
		return fmt.Sprintf("directory %s is owned by user %d, not by the user ductile runs as (%d) or root: its owner can replace the files in it; move the config to a directory you own", dir, st.uid, euid)
	case mode&0o022 != 0 && st.mode&fs.ModeSticky == 0:
		return fmt.Sprintf("directory %s may be written by %s (mode %04o): whoever can write it can rename their own file in place of this one; run chmod go-w %s", dir, who(mode>>1), mode, dir)
	}
	return ""
}

// directoriesAbove lists the directories from path's own up to stop
// (included) when path is inside stop, else up to the filesystem root.
func directoriesAbove(path, stop string) []string {
	var out []string
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		out = append(out, dir)
		if dir == stop || dir == filepath.Dir(dir) {
			return out
		}
	}
}

// directoryProblems checks the directories above path (and above the file
// it links to, if it is a symlink) up to the config directory.
func (c *Config) directoryProblems(path string, euid uint32, seen map[string]bool) []string {
	dirs := directoriesAbove(path, c.Dir)
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		realDir, err := filepath.EvalSymlinks(c.Dir)
		if err != nil {
			realDir = c.Dir
		}
		dirs = append(dirs, directoriesAbove(real, realDir)...)
	}
	var out []string
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		info, err := os.Stat(dir)
		if err != nil {
			out = append(out, fmt.Sprintf("cannot check the permissions of directory %s: %v", dir, err))
			continue
		}
		if p := dirPermissionProblem(dir, statOf(info), euid); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checksumsFile is .checksums as read once, for both its permissions and
// the hashes it lists.
type checksumsFile struct {
	exists bool
	data   []byte
	stat   fileStat
}

// readChecksumsFile reads the checksums file at path (missing: exists is
// false) and the stat of the descriptor it read.
func readChecksumsFile(path string) (checksumsFile, error) {
	data, st, err := readConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return checksumsFile{}, nil
	}
	if err != nil {
		return checksumsFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	return checksumsFile{exists: true, data: data, stat: st}, nil
}

// permissionProblems checks the owners and modes of the high-security
// files and of .checksums (if there is one) as they were read, and the
// directories above them: errors for those another user may change,
// warnings for those a group or others may read.
func (c *Config) permissionProblems(sums checksumsFile, euid uint32) (errs, warnings []FieldError) {
	type checked struct {
		path string
		stat fileStat
		ok   bool
	}
	var files []checked
	for _, f := range c.Checksums() {
		if c.HighSecurity(f.Path) {
			st, ok := c.fileStats[f.Path]
			files = append(files, checked{f.Path, st, ok})
		}
	}
	if sums.exists {
		files = append(files, checked{c.ChecksumsPath(), sums.stat, true})
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := displayPath(c.Dir, f.path)
		if !f.ok {
			errs = append(errs, FieldError{File: name, Msg: "cannot check its permissions: it was not read"})
			continue
		}
		refuse, warn := filePermissionProblem(f.path, f.stat, euid)
		for _, p := range c.directoryProblems(f.path, euid, seen) {
			errs = append(errs, FieldError{File: name, Msg: p})
		}
		switch {
		case refuse != "":
			errs = append(errs, FieldError{File: name, Msg: refuse})
		case warn != "":
			warnings = append(warnings, FieldError{File: name, Msg: warn})
		}
	}
	return errs, warnings
}

// effectiveUID is the user whose files ductile trusts.
func effectiveUID() uint32 { return uint32(os.Geteuid()) }
