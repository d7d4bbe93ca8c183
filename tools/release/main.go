package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	var targets string
	flag.StringVar(&o.Version, "version", "", "the release's `VERSION`, such as v0.3.0 (required)")
	flag.StringVar(&o.Revision, "revision", "", "the git `COMMIT` it is built from (required)")
	flag.StringVar(&o.Date, "date", "", "the build `TIME`, RFC 3339 (default: now, UTC)")
	flag.StringVar(&o.Root, "root", ".", "the repository's root `DIR`")
	flag.StringVar(&o.Out, "out", "dist", "write the archives and SHA256SUMS into `DIR` (its earlier release files are replaced)")
	flag.StringVar(&targets, "targets", strings.Join(targetNames(defaultTargets), ","), "comma-separated `GOOS/ARCH` list (arch: amd64, arm64, armv7)")
	flag.Parse()
	if o.Date == "" {
		o.Date = time.Now().UTC().Format(time.RFC3339)
	}
	var err error
	if o.Targets, err = parseTargets(targets); err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var r result
		if r, err = build(ctx, o, os.Stderr); err == nil {
			for _, a := range r.Archives {
				fmt.Println(a.Path)
			}
			fmt.Println(r.Sums)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "release: %v\n", err)
	os.Exit(1)
}
