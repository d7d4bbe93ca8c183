package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// Load reads the config file at path and everything it includes, and returns
// the merged, validated Config. A config file that cannot be read is returned
// wrapped (errors.Is(err, fs.ErrNotExist) tells a missing file); every problem
// inside the files comes back together as a *ValidationError.
//
// Load order: a file, then each of its include: entries in order (a directory
// contributes its *.yaml and *.yml files in lexical order, skipping dotfiles
// and subdirectories), depth first. Later files override earlier ones:
// mappings merge key by key, any other value replaces the earlier one, except
// that the top-level routes and pipelines lists concatenate. An empty value
// never overrides.
func Load(path string) (*Config, error) { return load(path, requireChecksums, false) }

// Limits on what Load reads, so that a config naming a device, a pipe or a
// huge file cannot hang it or exhaust memory.
const (
	// MaxFileSize bounds each config file: the file given to Load and every
	// include.
	MaxFileSize = 1 << 20
	// MaxTotalSize bounds all the files of one Load together.
	MaxTotalSize = 4 << 20
)

// readConfigFile reads path if it is a regular file of at most MaxFileSize
// bytes. It opens without blocking (a FIFO with no writer would otherwise
// hang the open) and checks the file it opened, not the path, so a file
// swapped after a check cannot slip through; it reads no more than the
// limit even if the file grows meanwhile. It returns the mode and owner of
// the file it read, for the permission checks.
func readConfigFile(path string) ([]byte, fileStat, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileStat{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fileStat{}, err
	}
	st := statOf(info)
	refuse := func(format string, args ...any) ([]byte, fileStat, error) {
		return nil, fileStat{}, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf(format, args...)}
	}
	if !info.Mode().IsRegular() {
		return refuse("is %s, not a regular file: a config file must be a regular file", fileKind(info.Mode()))
	}
	if info.Size() > MaxFileSize {
		return refuse("is %d bytes, over the %s limit for a config file: split it into files joined with include:", info.Size(), sizeName(MaxFileSize))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fileStat{}, err
	}
	if len(data) > MaxFileSize {
		return refuse("grew past the %s limit for a config file while being read", sizeName(MaxFileSize))
	}
	return data, st, nil
}

// fileKind names the type of a file that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file"
	}
}

// sizeName writes a size in bytes as MiB.
func sizeName(n int) string {
	return fmt.Sprintf("%d MiB", n>>20)
}

// loadData loads the config file at abs, whose content is data: every
// problem comes back together as a *ValidationError.
func loadData(abs string, data []byte, st fileStat, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg, errs := decodeFiles(abs, data, st, lookupEnv, false)
	if len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	return cfg, nil
}

// decodeFiles decodes the config file at abs, whose content is data, and
// its includes. It returns the config as far as it decoded (never nil) and
// every problem found, sorted by file in load order, then line. With
// deferEnv, a placeholder whose variable is not set is left as written and
// listed in the config's unset (see Config.Unset) instead of failing.
func decodeFiles(abs string, data []byte, st fileStat, lookupEnv func(string) (string, bool), deferEnv bool) (*Config, []FieldError) {
	l := &loader{
		dir:          filepath.Dir(abs),
		lookupEnv:    lookupEnv,
		deferEnv:     deferEnv,
		loaded:       map[string]string{},
		fileOrder:    map[string]int{},
		active:       map[*yaml.Node]bool{},
		origin:       map[*yaml.Node]string{},
		interpolated: map[*yaml.Node]bool{},
		unresolved:   map[*yaml.Node]bool{},
		fileKeys:     map[string][]string{},
		stats:        map[string]fileStat{abs: st},
	}
	l.bytesRead = len(data)
	l.loadFile(abs, data, []string{abs})

	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, doc := range l.docs {
		merge(root, doc, true)
	}
	l.interpolate(root, "")

	cfg := Default()
	cfg.Source = abs
	cfg.Dir = l.dir
	cfg.Files = l.files
	cfg.FileHashes = l.hashes
	cfg.origin = l.origin
	cfg.interpolated = l.interpolated
	cfg.pluginConfig = map[string]*yaml.Node{}
	cfg.pluginKeys = map[string]*yaml.Node{}
	cfg.schedules = map[string]*scheduleNodes{}
	cfg.fileKeys = l.fileKeys
	cfg.fileStats = l.stats
	l.decode(root, cfg)
	cfg.unset = l.unset
	l.sortErrors(l.errs)
	sort.SliceStable(cfg.unset, func(i, j int) bool { return l.before(cfg.unset[i].at, cfg.unset[j].at) })
	return cfg, l.errs
}

// sortErrors orders errs by file in load order, then line.
func (l *loader) sortErrors(errs []FieldError) {
	sort.SliceStable(errs, func(i, j int) bool { return l.before(errs[i], errs[j]) })
}

// before reports whether a comes before b: by file in load order, then line.
func (l *loader) before(a, b FieldError) bool {
	if fa, fb := l.fileOrder[a.File], l.fileOrder[b.File]; fa != fb {
		return fa < fb
	}
	return a.Line < b.Line
}

// loader carries the state of one Load.
type loader struct {
	dir       string // directory of the config file; display paths are relative to it
	lookupEnv func(string) (string, bool)
	// deferEnv leaves a placeholder whose variable is unset as written:
	// its node goes in unresolved, its error in unset (Config.Unset).
	deferEnv bool

	files        []string          // absolute paths in load order
	hashes       []FileHash        // of files, as read
	bytesRead    int               // of all files so far, against MaxTotalSize
	sizeOverflow bool              // MaxTotalSize was passed (and reported)
	loaded       map[string]string // absolute path → "file:line" of the include that loaded it
	fileOrder    map[string]int    // display path → load index, to sort errors
	docs         []*yaml.Node      // each file's top-level mapping, in load order

	active        map[*yaml.Node]bool // mappings and lists being normalized, to catch self-referring aliases
	aliasNodes    int                 // nodes copied by alias expansion so far
	aliasOverflow bool

	origin       map[*yaml.Node]string
	interpolated map[*yaml.Node]bool
	unresolved   map[*yaml.Node]bool // scalars left as written: their variable is unset (deferEnv)
	unset        []unsetVar          // where each of unresolved is, and its variable
	fileKeys     map[string][]string // absolute path → its top-level keys
	stats        map[string]fileStat // absolute path → mode and owner, as read
	errs         []FieldError
}

// fail records a problem at node n.
// Whatever the message quotes of the config is redacted (RedactString): a
// credential in a mistyped value must not reach a terminal or a log.
// A value left unresolved (deferEnv) is not checked: it is not known here.
func (l *loader) fail(n *yaml.Node, path, format string, args ...any) {
	if l.unresolved[n] {
		return
	}
	l.errs = append(l.errs, FieldError{File: l.origin[n], Line: n.Line, Path: path, Msg: RedactString(fmt.Sprintf(format, args...))})
}

// display returns path relative to the config directory when it is inside it.
func (l *loader) display(path string) string { return displayPath(l.dir, path) }

// displayPath returns path relative to dir when it is inside dir: how
// FieldError names files.
func displayPath(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel
	}
	return path
}

// loadFile parses one file, queues its top-level mapping for merging, then
// loads its includes. chain is the include chain that led here, ending with
// path, for cycle reports.
func (l *loader) loadFile(path string, data []byte, chain []string) {
	file := l.display(path)
	l.files = append(l.files, path)
	l.hashes = append(l.hashes, hashFile(path, data))
	l.fileOrder[file] = len(l.files)

	root := l.parse(file, data)
	if root == nil {
		return
	}
	if l.foreign(file, root) {
		return
	}
	l.normalize(root, file, "", 0)
	markOrigin(root, file, l.origin)
	for i := 0; i+1 < len(root.Content); i += 2 {
		l.fileKeys[path] = append(l.fileKeys[path], root.Content[i].Value)
	}

	// The include key is consumed here, so only the other keys are merged.
	var includes *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "include" {
			includes = root.Content[i+1]
			root.Content = append(root.Content[:i:i], root.Content[i+2:]...)
			break
		}
	}
	l.docs = append(l.docs, root)
	if includes == nil {
		return
	}
	before := len(l.errs)
	l.interpolate(includes, "include")
	if isNull(includes) || len(l.errs) > before {
		return
	}
	if includes.Kind != yaml.SequenceNode {
		l.fail(includes, "include", "must be a list of files or directories, e.g. include: [more.yaml, conf.d/]")
		return
	}
	for i, entry := range includes.Content {
		l.include(path, entry, indexPath("include", i), chain)
	}
}

// include loads the file or directory named by entry of file from.
func (l *loader) include(from string, entry *yaml.Node, path string, chain []string) {
	if entry.Kind != yaml.ScalarNode || isNull(entry) || entry.Value == "" {
		l.fail(entry, path, "must be a file or directory path")
		return
	}
	target, err := expandHome(entry.Value)
	if err != nil {
		l.fail(entry, path, "%v", err)
		return
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(from), target)
	}
	info, err := os.Stat(target)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			l.fail(entry, path, "%s not found (looked for %s): fix the path (relative to the directory of %s) or remove the entry", entry.Value, target, l.display(from))
		} else {
			l.fail(entry, path, "cannot read %s: %v", entry.Value, err)
		}
		return
	}
	if !info.IsDir() {
		if !yamlName(target) {
			l.fail(entry, path, "%s is not a YAML file: include only *.yaml and *.yml files (or a directory of them)", entry.Value)
			return
		}
		l.includeFile(target, entry, path, chain)
		return
	}
	dirEntries, err := os.ReadDir(target)
	if err != nil {
		l.fail(entry, path, "cannot read directory %s: %v", entry.Value, err)
		return
	}
	for _, de := range dirEntries { // ReadDir sorts by name
		name := de.Name()
		if strings.HasPrefix(name, ".") || !yamlName(name) {
			continue
		}
		file := filepath.Join(target, name)
		if fi, err := os.Stat(file); err != nil || fi.IsDir() {
			continue
		}
		l.includeFile(file, entry, path, chain)
	}
}

// yamlName reports whether a file name ends in .yaml or .yml, the only
// files include: reads.
func yamlName(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

func (l *loader) includeFile(target string, entry *yaml.Node, path string, chain []string) {
	for _, c := range chain {
		if c == target {
			names := make([]string, 0, len(chain)+1)
			for _, c := range chain {
				names = append(names, l.display(c))
			}
			names = append(names, l.display(target))
			l.fail(entry, path, "include cycle %s: remove one of these includes", strings.Join(names, " → "))
			return
		}
	}
	at := fmt.Sprintf("%s:%d", l.origin[entry], entry.Line)
	if by, ok := l.loaded[target]; ok {
		l.fail(entry, path, "%s is already included (by %s): include each file once", l.display(target), by)
		return
	}
	l.loaded[target] = at
	// A symlink named like a config file may point at any file: the file it
	// resolves to must be named like one too.
	if real, err := filepath.EvalSymlinks(target); err == nil && !yamlName(real) {
		l.fail(entry, path, "%s links to %s, which is not a YAML file: include only *.yaml and *.yml files", l.display(target), real)
		return
	}
	data, st, err := readConfigFile(target)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		l.fail(entry, path, "cannot read %s: %v", l.display(target), err)
		return
	}
	if l.bytesRead += len(data); l.bytesRead > MaxTotalSize {
		if !l.sizeOverflow {
			l.sizeOverflow = true
			l.fail(entry, path, "%s takes the config files loaded past %s in all: merge or remove includes", l.display(target), sizeName(MaxTotalSize))
		}
		return
	}
	l.stats[target] = st
	l.loadFile(target, data, append(chain[:len(chain):len(chain)], target))
}

// foreign reports, once, a file none of whose top-level keys is a config key
// or close to one, and returns true: it is not a config file (a wrong path,
// another program's file), so its keys are not quoted back one by one.
func (l *loader) foreign(file string, root *yaml.Node) bool {
	known := topLevelKeys()
	keys := 0
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if k.Kind == yaml.ScalarNode && (slices.Contains(known, k.Value) || strings.HasPrefix(k.Value, "x-") || Suggest(k.Value, known) != "") {
			return false
		}
		keys++
	}
	if keys == 0 {
		return false
	}
	l.errs = append(l.errs, FieldError{File: file, Line: root.Line, Msg: fmt.Sprintf(
		"not a ductile config file: none of its %d top-level keys is a config key (%s): check the path", keys, strings.Join(known, ", "))})
	return true
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// parse returns the top-level mapping of data, an empty one for an empty
// file, or nil after recording why it cannot.
func (l *loader) parse(file string, data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		fe := FieldError{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Msg = "invalid YAML: " + strings.TrimPrefix(err.Error(), m[0])
		}
		l.errs = append(l.errs, fe)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		l.errs = append(l.errs, FieldError{File: file, Line: extra.Line, Msg: "a second YAML document (---) is not supported: keep one document per file and split with include:"})
		return nil
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	root := doc.Content[0]
	switch {
	case root.Kind == yaml.MappingNode:
		return root
	case isNull(root):
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line}
	default:
		l.errs = append(l.errs, FieldError{File: file, Line: root.Line, Msg: "the top level must be a mapping of keys (service:, plugins:, routes:, …)"})
		return nil
	}
}

// maxAliasNodes bounds how many nodes alias expansion may copy in one Load,
// so a file of nested aliases cannot blow up memory.
const maxAliasNodes = 100_000

// normalize expands aliases and << merge keys in place, and drops (and
// reports) keys repeated within one mapping, so that later steps see a plain
// tree. yaml.v3 does none of this when decoding into a yaml.Node.
func (l *loader) normalize(n *yaml.Node, file, path string, depth int) {
	if depth > 100 {
		l.errs = append(l.errs, FieldError{File: file, Line: n.Line, Path: path, Msg: "nested more than 100 levels deep: flatten it"})
		setNull(n)
		return
	}
	switch n.Kind {
	case yaml.AliasNode:
		target := n.Alias
		switch {
		case target == nil:
			setNull(n)
			return
		case l.active[target]:
			l.errs = append(l.errs, FieldError{File: file, Line: n.Line, Path: path, Msg: fmt.Sprintf("alias *%s is inside the value it refers to: remove the alias", n.Value)})
			setNull(n)
			return
		}
		l.aliasNodes += countNodes(target)
		if l.aliasNodes > maxAliasNodes {
			if !l.aliasOverflow {
				l.aliasOverflow = true
				l.errs = append(l.errs, FieldError{File: file, Line: n.Line, Path: path, Msg: fmt.Sprintf("aliases expand to more than %d values: write the values out", maxAliasNodes)})
			}
			setNull(n)
			return
		}
		line, col := n.Line, n.Column
		*n = *deepCopy(target)
		n.Line, n.Column, n.Anchor = line, col, ""
		l.normalize(n, file, path, depth+1)
	case yaml.SequenceNode:
		l.active[n] = true
		defer delete(l.active, n)
		for i, c := range n.Content {
			l.normalize(c, file, indexPath(path, i), depth+1)
		}
	case yaml.MappingNode:
		l.active[n] = true
		defer delete(l.active, n)
		var own, merged []*yaml.Node
		seen := map[string]*yaml.Node{}
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				l.normalize(v, file, path, depth+1)
				merges = append(merges, v)
				continue
			}
			l.normalize(k, file, path, depth+1)
			if first, ok := seen[k.Value]; ok {
				l.errs = append(l.errs, FieldError{File: file, Line: k.Line, Path: joinPath(path, k.Value),
					Msg: fmt.Sprintf("key defined twice in the same mapping (first at line %d): remove one", first.Line)})
				continue
			}
			seen[k.Value] = k
			l.normalize(v, file, joinPath(path, k.Value), depth+1)
			own = append(own, k, v)
		}
		// << merges: keys written in the mapping win, then earlier sources.
		for _, m := range merges {
			sources := []*yaml.Node{m}
			if m.Kind == yaml.SequenceNode {
				sources = m.Content
			}
			for _, src := range sources {
				if src.Kind != yaml.MappingNode {
					l.errs = append(l.errs, FieldError{File: file, Line: src.Line, Path: path, Msg: "<< must merge a mapping or a list of mappings"})
					continue
				}
				for i := 0; i+1 < len(src.Content); i += 2 {
					if _, ok := seen[src.Content[i].Value]; ok {
						continue
					}
					seen[src.Content[i].Value] = src.Content[i]
					merged = append(merged, deepCopy(src.Content[i]), deepCopy(src.Content[i+1]))
				}
			}
		}
		n.Content = append(own, merged...)
	}
}

func setNull(n *yaml.Node) {
	n.Kind, n.Tag, n.Value, n.Content, n.Alias = yaml.ScalarNode, "!!null", "", nil, nil
}

func countNodes(n *yaml.Node) int {
	count := 1
	for _, c := range n.Content {
		count += countNodes(c)
	}
	return count
}

func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	if n.Content != nil {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			c.Content[i] = deepCopy(child)
		}
	}
	return &c
}

func markOrigin(n *yaml.Node, file string, origin map[*yaml.Node]string) {
	origin[n] = file
	for _, c := range n.Content {
		markOrigin(c, file, origin)
	}
}

// merge folds src, a later file's mapping, into dst.
func merge(dst, src *yaml.Node, top bool) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j := -1
		for d := 0; d+1 < len(dst.Content); d += 2 {
			if dst.Content[d].Value == k.Value {
				j = d
				break
			}
		}
		if j < 0 {
			dst.Content = append(dst.Content, k, v)
			continue
		}
		old := dst.Content[j+1]
		switch {
		case isNull(v):
			// An empty value in a later file adds nothing.
		case top && (k.Value == "routes" || k.Value == "pipelines" || k.Value == "tokens") &&
			old.Kind == yaml.SequenceNode && v.Kind == yaml.SequenceNode:
			old.Content = append(old.Content, v.Content...)
		case old.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode:
			merge(old, v, false)
		default:
			dst.Content[j], dst.Content[j+1] = k, v
		}
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// expandHome replaces a leading ~ with the user's home directory.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", fmt.Errorf("%s: ~user paths are not supported: write the full path", p)
		}
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s: cannot expand ~ (%v): write the full path", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}
