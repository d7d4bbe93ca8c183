package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/internal/pkitest"
)

func TestCheckTLS(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, "test CA")
	certFile, keyFile := ca.Issue(t, "ductile.home.example", "127.0.0.1").Write(t, dir, "server")
	cfg := config.Default()
	cfg.APIServer.TLS = config.APITLS{CertFile: certFile, KeyFile: keyFile}
	cfg.APIServer.Hosts = []string{"ductile.home.example", "box.lan"}

	errs, warnings := checkTLS(cfg, time.Now())
	require.Empty(t, errs)
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "api.hosts: box.lan is not a name of the certificate")

	errs, warnings = checkTLS(cfg, time.Now().Add(48*time.Hour))
	require.Empty(t, errs)
	require.Contains(t, warnings[0], "the certificate expired at")

	require.NoError(t, os.Chmod(keyFile, 0o640))
	_, warnings = checkTLS(cfg, time.Now())
	require.Contains(t, strings.Join(warnings, "\n"), "api.tls.key_file: "+keyFile+" is readable by other users (mode 0640)")
	require.NoError(t, os.Chmod(keyFile, 0o600))

	// Another certificate's key.
	_, otherKey := ca.Issue(t, "x").Write(t, dir, "other")
	cfg.APIServer.TLS.KeyFile = otherKey
	errs, _ = checkTLS(cfg, time.Now())
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], "do not load as a certificate and its key")
	require.Contains(t, errs[0], "private key does not match public key")

	cfg.APIServer.TLS.KeyFile = filepath.Join(dir, "missing.key")
	errs, _ = checkTLS(cfg, time.Now())
	require.Contains(t, errs[0], "api.tls.key_file: open "+cfg.APIServer.TLS.KeyFile)
	require.Contains(t, errs[0], "give the PEM file of the certificate's private key")

	require.NoError(t, os.WriteFile(certFile, []byte("junk"), 0o600))
	cfg.APIServer.TLS.KeyFile = keyFile
	errs, _ = checkTLS(cfg, time.Now())
	require.Contains(t, errs[0], "do not load as a certificate and its key")

	// The API off, or without TLS: nothing to check.
	cfg.APIServer.Enabled = false
	errs, warnings = checkTLS(cfg, time.Now())
	require.Empty(t, append(errs, warnings...))
}
