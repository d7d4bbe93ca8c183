package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A target is one platform a release ships a binary for.
type target struct {
	OS, Arch string // GOOS and GOARCH
	ARM      string // GOARM for Arch "arm" ("7": a Raspberry Pi 2 or later on a 32-bit OS)
}

// Name is the platform as archives and -targets spell it: linux/armv7.
func (t target) Name() string {
	if t.Arch == "arm" {
		return t.OS + "/armv" + t.ARM
	}
	return t.OS + "/" + t.Arch
}

// defaultTargets are the platforms of a release: servers and home
// machines (linux amd64 and arm64), a Raspberry Pi on a 32-bit OS, and a
// Mac with Apple silicon (pluginhost's portable path; unsigned, and its
// service is a launchd agent, not a systemd unit).
var defaultTargets = []target{
	{OS: "linux", Arch: "amd64"},
	{OS: "linux", Arch: "arm64"},
	{OS: "linux", Arch: "arm", ARM: "7"},
	{OS: "darwin", Arch: "arm64"},
}

func targetNames(ts []target) []string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Name())
	}
	return names
}

// parseTargets reads a -targets list: names of defaultTargets.
func parseTargets(list string) ([]target, error) {
	var ts []target
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(defaultTargets, func(t target) bool { return t.Name() == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown target %q: choose among %s", name, strings.Join(targetNames(defaultTargets), ", "))
		}
		ts = append(ts, defaultTargets[i])
	}
	return ts, nil
}

// options say what to build and where.
type options struct {
	Version, Revision, Date string
	Root                    string // the repository's root
	Out                     string // where archives and SHA256SUMS go
	Targets                 []target
}

// An archive is one platform's tar.gz.
type archive struct {
	Target target
	Path   string // under Out
	SHA256 string // hex
}

// result is what build wrote.
type result struct {
	Archives []archive
	Sums     string // the SHA256SUMS file
}

// sumsName is the checksum file's name, in the format sha256sum -c reads.
const sumsName = "SHA256SUMS"

// build builds every target's binary, archives each with the files a user
// needs beside it, and writes the checksums of the archives. The binaries
// are built under Out/build; earlier archives and checksums in Out are
// removed first, so Out holds one release.
func build(ctx context.Context, o options, log io.Writer) (result, error) {
	if o.Version == "" || o.Revision == "" || o.Date == "" {
		return result{}, errors.New("give -version, -revision and -date (task release passes them from git)")
	}
	if strings.ContainsAny(o.Version, "/ \t\n") {
		return result{}, fmt.Errorf("version %q: use a tag-like name without slashes or spaces, such as v0.3.0", o.Version)
	}
	extras := make([][]file, len(o.Targets))
	for i, t := range o.Targets {
		var err error
		if extras[i], err = extraFiles(o.Root, t); err != nil {
			return result{}, err
		}
	}
	if err := clean(o.Out); err != nil {
		return result{}, err
	}
	date, err := time.Parse(time.RFC3339, o.Date)
	if err != nil {
		return result{}, fmt.Errorf("-date %q is not RFC 3339 (such as 2026-12-07T22:00:00Z): %w", o.Date, err)
	}
	var r result
	var sums strings.Builder
	for i, t := range o.Targets {
		start := time.Now()
		bin := filepath.Join(o.Out, "build", strings.ReplaceAll(t.Name(), "/", "_"), "ductile")
		if err := compile(ctx, o, t, bin); err != nil {
			return r, err
		}
		base := fmt.Sprintf("ductile_%s_%s", o.Version, strings.ReplaceAll(t.Name(), "/", "_"))
		path := filepath.Join(o.Out, base+".tar.gz")
		files := append([]file{{Name: "ductile", Source: bin, Mode: 0o755}}, extras[i]...)
		sum, err := writeArchive(path, base, files, date)
		if err != nil {
			return r, err
		}
		r.Archives = append(r.Archives, archive{Target: t, Path: path, SHA256: sum})
		fmt.Fprintf(&sums, "%s  %s\n", sum, filepath.Base(path))
		fmt.Fprintf(log, "built %s in %.1fs\n", filepath.Base(path), time.Since(start).Seconds())
	}
	r.Sums = filepath.Join(o.Out, sumsName)
	if err := os.WriteFile(r.Sums, []byte(sums.String()), 0o644); err != nil {
		return r, fmt.Errorf("write %s: %w", sumsName, err)
	}
	return r, nil
}

// clean removes from out what an earlier release wrote there (archives,
// checksums, built binaries) and nothing else.
func clean(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", out, err)
	}
	old, err := filepath.Glob(filepath.Join(out, "ductile_*.tar.gz"))
	if err != nil {
		return err
	}
	for _, p := range append(old, filepath.Join(out, sumsName), filepath.Join(out, "build")) {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove the earlier release's %s: %w", p, err)
		}
	}
	return nil
}

// compile builds ./cmd/ductile for t into bin: static (no cgo), without
// the build machine's paths, with version, revision and date stamped.
func compile(ctx context.Context, o options, t target, bin string) error {
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X", "main.stampedVersion=" + o.Version,
		"-X", "main.stampedRevision=" + o.Revision,
		"-X", "main.stampedDate=" + o.Date,
	}, " ")
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", abs, "./cmd/ductile")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOARM="+t.ARM)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build %s: %w\n%s", t.Name(), err, out)
	}
	return nil
}

// A file goes into every archive.
type file struct {
	Name   string // its path in the archive, under the top folder
	Source string // where it is read from
	Mode   int64
}

// extraFiles are the files t's archive holds beside the binary: the
// README, the licence, the install guide, and
// the service definitions: the systemd units under docs/systemd (Linux),
// the launchd agent under docs/launchd (macOS).
func extraFiles(root string, t target) ([]file, error) {
	files := []file{
		{Name: "README.md", Source: filepath.Join(root, "README.md"), Mode: 0o644},
		{Name: "LICENSE", Source: filepath.Join(root, "LICENSE"), Mode: 0o644},
		{Name: "install.md", Source: filepath.Join(root, "docs", "install.md"), Mode: 0o644},
	}
	folder, pattern := "systemd", "*.service"
	if t.OS == "darwin" {
		folder, pattern = "launchd", "*.plist"
	}
	services, err := filepath.Glob(filepath.Join(root, "docs", folder, pattern))
	if err != nil {
		return nil, err
	}
	if len(services) == 0 {
		return nil, fmt.Errorf("no %s files under %s: run from the repository's root (-root)", folder, filepath.Join(root, "docs", folder))
	}
	for _, u := range services {
		files = append(files, file{Name: folder + "/" + filepath.Base(u), Source: u, Mode: 0o644})
	}
	for _, f := range files {
		if _, err := os.Stat(f.Source); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is missing: run from the repository's root (-root)", f.Source)
		}
	}
	return files, nil
}

// writeArchive writes a tar.gz at path holding files under the folder
// base/, every entry dated date and owned by root, so that the same inputs
// give the same archive; it returns the archive's SHA-256 (hex).
func writeArchive(path, base string, files []file, date time.Time) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, file := range files {
		for _, d := range []string{base, filepath.Dir(base + "/" + file.Name)} {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: date, Format: tar.FormatPAX}); err != nil {
				return "", fmt.Errorf("archive %s: %w", path, err)
			}
		}
		if err := addFile(tw, base+"/"+file.Name, file, date); err != nil {
			return "", fmt.Errorf("archive %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), f.Close()
}

func addFile(tw *tar.Writer, name string, file file, date time.Time) error {
	src, err := os.Open(file.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: file.Mode, ModTime: date, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}
