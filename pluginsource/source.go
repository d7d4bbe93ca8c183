package pluginsource

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Source kinds.
const (
	KindGit    = "git"    // a git URL or a local git repository: pinned to a commit
	KindFolder = "folder" // a plain folder: copied as it is, nothing to pin but the files' hashes
)

// RecordName is the file in an installed plugin's directory that says
// where it came from.
const RecordName = ".ductile-source.json"

// Record is what RecordName holds.
type Record struct {
	// Source is what was given: a URL, or an absolute path.
	Source string `json:"source"`
	Kind   string `json:"kind"`
	// Ref is the ref asked for ("" for the source's default branch, HEAD).
	Ref string `json:"ref,omitempty"`
	// Commit is the commit the files come from (git only).
	Commit string `json:"commit,omitempty"`
	// Path is the plugin's folder inside the source ("" for its top).
	Path string `json:"path,omitempty"`
	// InstalledAt is when the files were installed (RFC 3339, UTC).
	InstalledAt string `json:"installed_at"`
}

// ReadRecord reads the record of the plugin directory dir; a directory
// without one gives nil, nil.
func ReadRecord(dir string) (*Record, error) {
	data, err := os.ReadFile(filepath.Join(dir, RecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, RecordName), err)
	}
	return &r, nil
}

func writeRecord(dir string, r Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, RecordName), append(data, '\n'), 0o644)
}

// Source is a parsed SOURCE[@REF].
type Source struct {
	// Location is the URL, or the absolute path of a local repository or
	// folder.
	Location string
	Kind     string
	Ref      string
}

// ParseSource reads SOURCE[@REF]. A local path that exists is a folder, or
// a git repository when it holds .git (or is a bare repository); anything
// else with a scheme (https://, ssh://, file://, git://) or in scp form
// (user@host:path) is a git URL. The ref is split off at the last '@' that
// follows the URL's path (a URL's user@ is not a ref) and holds no ':'.
func ParseSource(s string) (Source, error) {
	if s == "" {
		return Source{}, errors.New("no source given: a git URL, a local git repository or a folder")
	}
	if src, ok := localSource(s, ""); ok {
		return src, nil
	}
	loc, ref := splitRef(s)
	if ref != "" {
		if src, ok := localSource(loc, ref); ok {
			return src, nil
		}
	}
	if scheme, _, ok := strings.Cut(loc, "://"); ok {
		switch scheme {
		case "https", "http", "ssh", "git", "file":
			return Source{Location: loc, Kind: KindGit, Ref: ref}, nil
		}
		return Source{}, fmt.Errorf("%s: git URLs here are https://, http://, ssh://, git:// or file:// (or user@host:path)", s)
	}
	if scpLike(loc) {
		return Source{Location: loc, Kind: KindGit, Ref: ref}, nil
	}
	return Source{}, fmt.Errorf("%s is neither a folder nor a git URL: give a path that exists, or a URL such as https://host/owner/repo.git", s)
}

func localSource(path, ref string) (Source, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return Source{}, false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Source{}, false
	}
	kind := KindFolder
	if exists(filepath.Join(abs, ".git")) || exists(filepath.Join(abs, "HEAD")) && exists(filepath.Join(abs, "objects")) {
		kind = KindGit
	}
	return Source{Location: abs, Kind: kind, Ref: ref}, true
}

// splitRef splits s at its ref's '@'.
func splitRef(s string) (loc, ref string) {
	at := strings.LastIndex(s, "@")
	if at <= 0 || at == len(s)-1 || strings.Contains(s[at+1:], ":") {
		return s, ""
	}
	// The '@' must come after where the path starts: after the host of a
	// URL with a scheme, after the ':' of the scp form.
	pathStart := 0
	if i := strings.Index(s, "://"); i >= 0 {
		slash := strings.Index(s[i+3:], "/")
		if slash < 0 {
			return s, ""
		}
		pathStart = i + 3 + slash
	} else if scpLike(s[:at]) {
		pathStart = strings.Index(s, ":")
	}
	if at < pathStart {
		return s, ""
	}
	return s[:at], s[at+1:]
}

// scpLike reports whether s is git's scp form, [user@]host:path.
func scpLike(s string) bool {
	colon := strings.Index(s, ":")
	if colon <= 0 || strings.Contains(s[:colon], "/") || strings.HasPrefix(s[colon:], "::") {
		return false // ext::…, a transport helper, is not a host
	}
	return len(s) > colon+1
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// String is the source as given.
func (s Source) String() string {
	if s.Ref == "" {
		return s.Location
	}
	return s.Location + "@" + s.Ref
}
