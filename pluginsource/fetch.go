package pluginsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// fetched is a source's tree on disk.
type fetched struct {
	dir    string // the tree's top
	commit string // git only
	remove func() // removes what fetch wrote (a no-op for a folder)
}

// fetch gets src's tree: a folder is used where it is; a git source is
// fetched at src.Ref (default HEAD) into a temporary directory, shallow
// where the server allows it, and checked out.
func fetch(ctx context.Context, src Source) (*fetched, error) {
	if src.Kind == KindFolder {
		if src.Ref != "" {
			return nil, fmt.Errorf("%s is a folder, not a git repository: it has no ref to check out (drop @%s)", src.Location, src.Ref)
		}
		return &fetched{dir: src.Location, remove: func() {}}, nil
	}
	tmp, err := os.MkdirTemp("", "ductile-plugin-fetch-")
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", src, err)
	}
	f := &fetched{dir: tmp, remove: func() { _ = os.RemoveAll(tmp) }}
	if err := gitFetch(ctx, tmp, src); err != nil {
		f.remove()
		return nil, err
	}
	if f.commit, err = git(ctx, tmp, "rev-parse", "HEAD"); err != nil {
		f.remove()
		return nil, fmt.Errorf("fetch %s: %w", src, err)
	}
	return f, nil
}

// gitFetch fetches src into the empty directory dir and checks it out
// (detached). It asks for the ref alone, one commit deep, first; when the
// server refuses that (an abbreviated commit id, a server that does not
// serve commits by id), it fetches every branch and tag and resolves the ref
// among them.
func gitFetch(ctx context.Context, dir string, src Source) error {
	ref := src.Ref
	if ref == "" {
		ref = "HEAD"
	}
	if strings.HasPrefix(ref, "-") || strings.ContainsFunc(ref, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%q is not a branch, tag or commit (one never starts with '-' or holds spaces)", ref)
	}
	if _, err := git(ctx, dir, "init", "-q"); err != nil {
		return fmt.Errorf("fetch %s: %w", src, err)
	}
	_, shallowErr := git(ctx, dir, "fetch", "-q", "--depth", "1", "--no-tags", "--", src.Location, ref)
	if shallowErr == nil {
		if _, err := git(ctx, dir, "checkout", "-q", "--detach", "FETCH_HEAD"); err != nil {
			return fmt.Errorf("fetch %s: check out: %w", src, err)
		}
		return nil
	}
	if _, err := git(ctx, dir, "fetch", "-q", "--tags", "--", src.Location, "+refs/heads/*:refs/remotes/origin/*"); err != nil {
		return fmt.Errorf("fetch %s: %w (check the URL, and that this user may read it)", src, err)
	}
	for _, candidate := range []string{ref, "origin/" + ref} {
		commit, err := git(ctx, dir, "rev-parse", "-q", "--verify", candidate+"^{commit}")
		if err != nil {
			continue
		}
		if _, err := git(ctx, dir, "checkout", "-q", "--detach", commit); err != nil {
			return fmt.Errorf("fetch %s: check out: %w", src, err)
		}
		return nil
	}
	return fmt.Errorf("fetch %s: no branch, tag or commit %q there (%v)", src, src.Ref, shallowErr)
}

// git runs git with args in dir and returns its trimmed stdout. It never
// prompts (a source that needs credentials fails instead of hanging a
// daemon's or a script's terminal).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "LC_ALL=C")
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes") // no passphrase or host-key prompt
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("git is not installed: install it (e.g. apt install git), or add the plugin from a folder")
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}
