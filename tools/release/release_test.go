package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRelease builds the release as task release does (every default
// target, stamped), then checks what a user gets: an archive per target
// holding the binary, README, licence, install guide and systemd units; SHA256SUMS
// that sha256sum -c accepts; and the linux/amd64 binary taken from its
// archive, run from an empty folder, prints the stamped version and starts
// a daemon that answers /healthz. It cross-compiles three binaries (about
// 35 s each once Go's build cache is warm, minutes when cold): -short
// skips it.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every release target (minutes): skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := t.TempDir()
	o := options{Version: "v9.8.7-test", Revision: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-07T22:00:00Z",
		Root: "../..", Out: out, Targets: defaultTargets}
	start := time.Now()
	r, err := build(ctx, o, testLog{t})
	require.NoError(t, err)
	t.Logf("release of %d targets built in %.1fs", len(defaultTargets), time.Since(start).Seconds())

	// Every target has its archive, with the same files in it.
	require.Len(t, r.Archives, len(defaultTargets))
	for i, a := range r.Archives {
		tg := defaultTargets[i]
		base := "ductile_v9.8.7-test_" + strings.ReplaceAll(tg.Name(), "/", "_")
		require.Equal(t, filepath.Join(out, base+".tar.gz"), a.Path)
		dir := t.TempDir()
		names := extract(t, a.Path, dir)
		services := []string{base + "/systemd/ductile.service", base + "/systemd/ductile-worker.service"}
		if tg.OS == "darwin" {
			services = []string{base + "/launchd/org.ductile.daemon.plist"}
			// A Mach-O executable for Apple silicon (it cannot run here).
			bin, err := macho.Open(filepath.Join(dir, base, "ductile"))
			require.NoError(t, err)
			require.Equal(t, macho.CpuArm64, bin.Cpu)
			require.Equal(t, macho.TypeExec, bin.Type)
			require.NoError(t, bin.Close())
		}
		require.ElementsMatch(t, append([]string{base + "/ductile", base + "/README.md", base + "/LICENSE", base + "/install.md"}, services...), names)
	}

	// The checksums verify, by sha256sum and by hand.
	sums, err := os.ReadFile(r.Sums)
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(sums)), "\n"), len(defaultTargets))
	if _, err := exec.LookPath("sha256sum"); err == nil {
		check := exec.CommandContext(ctx, "sha256sum", "-c", sumsName)
		check.Dir = out
		b, err := check.CombinedOutput()
		require.NoError(t, err, "%s", b)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, line)
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		got := sha256.Sum256(b)
		require.Equal(t, sum, hex.EncodeToString(got[:]), name)
	}

	// The linux/amd64 binary from its archive, in an empty folder.
	home := t.TempDir()
	extract(t, r.Archives[0].Path, home)
	bin := filepath.Join(home, "ductile_v9.8.7-test_linux_amd64", "ductile")
	empty := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + empty, "XDG_STATE_HOME=" + filepath.Join(empty, "state"), "XDG_CONFIG_HOME=" + filepath.Join(empty, "config")}
	version := exec.CommandContext(ctx, bin, "--version")
	version.Dir, version.Env = empty, env
	v, err := version.Output()
	require.NoError(t, err)
	require.Equal(t, "ductile v9.8.7-test\nrevision 0123456789abcdef0123456789abcdef01234567, built 2026-12-07T22:00:00Z\ngo", string(v)[:len("ductile v9.8.7-test\nrevision 0123456789abcdef0123456789abcdef01234567, built 2026-12-07T22:00:00Z\ngo")])
	require.True(t, strings.HasSuffix(string(v), " linux/amd64\n"), "%s", v)

	// The default port may be taken on a test machine: the one line of
	// config says to pick a free one.
	require.NoError(t, os.WriteFile(filepath.Join(empty, "config.yaml"), []byte("api: {listen: \"127.0.0.1:0\"}\n"), 0o600))
	daemon := exec.CommandContext(ctx, bin, "--config", "config.yaml", "--log-format", "json", "system", "start")
	daemon.Dir, daemon.Env = empty, env
	stdout, err := daemon.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, daemon.Start())
	defer daemon.Process.Kill()
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			var l struct {
				Msg  string `json:"message"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "api: listening" {
				addr <- l.Addr
			}
		}
		close(addr)
	}()
	var listening string
	select {
	case listening = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not say api: listening within 30s")
	}
	require.NotEmpty(t, listening, "the daemon exited before it listened")
	res, err := http.Get("http://" + listening + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.NoError(t, daemon.Process.Signal(syscall.SIGTERM))
	require.NoError(t, daemon.Wait(), "the daemon stops cleanly on SIGTERM")
	_, err = os.Stat(filepath.Join(empty, "state", "ductile", "ductile.db"))
	require.NoError(t, err, "the ledger is in $XDG_STATE_HOME/ductile")
}

// A parse error in -targets names the choices.
func TestParseTargets(t *testing.T) {
	ts, err := parseTargets("linux/armv7, linux/amd64,darwin/arm64")
	require.NoError(t, err)
	require.Equal(t, []target{{OS: "linux", Arch: "arm", ARM: "7"}, {OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}, ts)
	_, err = parseTargets("linux/mips")
	require.ErrorContains(t, err, `unknown target "linux/mips": choose among linux/amd64, linux/arm64, linux/armv7, darwin/arm64`)
}

// The launchd agent shipped in the macOS archive is a well-formed property
// list naming the binary's install path (launchd cannot be run here).
func TestLaunchdAgentIsWellFormed(t *testing.T) {
	b, err := os.ReadFile("../../docs/launchd/org.ductile.daemon.plist")
	require.NoError(t, err)
	var doc struct {
		XMLName xml.Name `xml:"plist"`
		Dict    struct {
			Keys    []string `xml:"key"`
			Strings []string `xml:"string"`
		} `xml:"dict"`
	}
	require.NoError(t, xml.Unmarshal(b, &doc))
	require.Contains(t, doc.Dict.Keys, "Label")
	require.Contains(t, doc.Dict.Keys, "ProgramArguments")
	require.Contains(t, doc.Dict.Strings, "org.ductile.daemon")
	require.Contains(t, string(b), "<string>/usr/local/bin/ductile</string>")
}

// extract unpacks a tar.gz into dir and returns the names of its files.
func extract(t *testing.T, path, dir string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(target, 0o755))
		case tar.TypeReg:
			names = append(names, h.Name)
			w, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(h.Mode))
			require.NoError(t, err)
			_, err = io.Copy(w, tr)
			require.NoError(t, err)
			require.NoError(t, w.Close())
		}
	}
}

// testLog writes the release's progress lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
