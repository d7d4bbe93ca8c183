package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/internal/pkitest"
)

// tlsWorld is a daemon whose API serves TLS with a certificate of a CA
// made by the test, and the files a worker on another machine would hold.
type tlsWorld struct {
	*jobWorld
	ca                *pkitest.CA
	caFile            string
	certFile, keyFile string
}

func newTLSWorld(t *testing.T) *tlsWorld {
	t.Helper()
	pki := t.TempDir()
	w := &tlsWorld{ca: pkitest.NewCA(t, "Ductile test CA"), caFile: filepath.Join(pki, "ca.crt")}
	pkitest.WriteFile(t, w.caFile, w.ca.PEM)
	w.certFile, w.keyFile = w.ca.Issue(t, "ductile.test", "127.0.0.1").Write(t, pki, "server")
	w.jobWorld = newJobWorld(t, "")
	w.writeConfig("api:\n  listen: 127.0.0.1:0\n  hosts: [ductile.test]\n  tls: {cert_file: " + w.certFile + ", key_file: " + w.keyFile + "}\n")
	return w
}

func (w *tlsWorld) writeConfig(text string) {
	w.t.Helper()
	require.NoError(w.t, os.WriteFile(w.config, []byte(text), 0o600))
}

// renew replaces the certificate and key files with a new pair of the same
// names, as a renewal does, and returns its serial.
func (w *tlsWorld) renew() *big.Int {
	w.t.Helper()
	pair := w.ca.Issue(w.t, "ductile.test", "127.0.0.1")
	pkitest.WriteFile(w.t, w.keyFile, pair.KeyPEM)
	pkitest.WriteFile(w.t, w.certFile, pair.CertPEM)
	return pair.Cert.SerialNumber
}

// apiAddr waits for the daemon's "api: listening" line and returns its
// address, requiring it to say tls.
func apiAddr(t *testing.T, d *proc) string {
	t.Helper()
	line, _ := d.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
		TLS  bool   `json:"tls"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	require.True(t, listening.TLS, line)
	return listening.Addr
}

// servedSerial is the serial of the certificate a new TLS connection to
// addr is served, verified against the CA.
func (w *tlsWorld) servedSerial(addr string) *big.Int {
	w.t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(w.ca.Cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "ductile.test", MinVersion: tls.VersionTLS12})
	require.NoError(w.t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// healthz calls GET /healthz of the API at addr by host (the Host header)
// with c, and returns the status code.
func healthz(t *testing.T, c *http.Client, addr, host string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/healthz", nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestAPIOverTLS: the daemon serves its API over TLS with api.tls; a client
// trusting the CA (--ca) calls it by a name of api.hosts; one that does not
// is refused with what to do; the Host check still refuses other names; a
// reload (system reload, and SIGHUP) serves a renewed certificate without
// a restart, and a reload to a pair that does not load keeps the old one.
func TestAPIOverTLS(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	r := w.run("config", "check")
	require.Equal(t, 0, r.code, r.String())
	d := w.startDaemon()
	addr := apiAddr(t, d)
	first := w.servedSerial(addr)

	withCA, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: w.caFile, Timeout: cmdTimeout})
	require.NoError(t, err)
	status, err := healthz(t, withCA, addr, "ductile.test")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "a name of api.hosts")
	status, err = healthz(t, withCA, addr, "rebound.example")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status, "a name neither loopback nor in api.hosts")

	withoutCA, err := apiclient.NewHTTPClient(apiclient.Options{Timeout: cmdTimeout})
	require.NoError(t, err)
	_, err = healthz(t, withoutCA, addr, "ductile.test")
	require.ErrorContains(t, err, "the daemon's certificate is not signed by a CA this machine trusts: pass --ca FILE with the CA that signed it")

	// A plaintext client is not served.
	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// Renewed, then reloaded: new connections get the new certificate.
	renewed := w.renew()
	require.NotEqual(t, first, renewed)
	require.Equal(t, first, w.servedSerial(addr), "nothing changes before the reload")
	r = w.run("system", "reload")
	require.Equal(t, 0, r.code, r.String())
	d.waitLine(t, 0, messageIs("api: certificate reloaded"))
	require.Equal(t, renewed, w.servedSerial(addr))
	status, err = healthz(t, withCA, addr, "ductile.test")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	// SIGHUP does the same.
	again := w.renew()
	_, seen := d.waitLine(t, 0, messageIs("api: certificate reloaded"))
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	d.waitLine(t, seen+1, messageIs("api: certificate reloaded"))
	require.Equal(t, again, w.servedSerial(addr))

	// A key that is not the certificate's: the reload is refused, the
	// certificate served stays.
	other := w.ca.Issue(t, "ductile.test")
	pkitest.WriteFile(t, w.keyFile, other.KeyPEM)
	r = w.run("system", "reload")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, "do not load as a certificate and its key")
	require.Equal(t, again, w.servedSerial(addr))

	// A reload to a plaintext listener off loopback is refused as well.
	w.writeConfig("api: {listen: \"0.0.0.0:0\"}\n")
	r = w.run("system", "reload")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, "api.listen: 0.0.0.0:0 is not a loopback address")
	require.Equal(t, again, w.servedSerial(addr))
	w.stopDaemon(d)
}

// TestPlaintextOffLoopbackRefusesToStart: api.listen on every interface
// without api.tls and without api.insecure_plaintext: true is a config
// error: config check and system start exit as for any other, saying what
// to add; nothing listens.
func TestPlaintextOffLoopbackRefusesToStart(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "api: {listen: \"0.0.0.0:0\"}\n")
	want := "api.listen: 0.0.0.0:0 is not a loopback address"
	check := w.run("config", "check")
	require.Equal(t, 1, check.code, check.String())
	require.Contains(t, check.stdout+check.stderr, want)

	r := w.run("system", "start")
	require.Equal(t, 1, r.code, r.String())
	for _, s := range []string{want, "add api.tls.cert_file and api.tls.key_file", "api.insecure_plaintext: true"} {
		require.Contains(t, r.stderr, s)
	}
	require.NotContains(t, r.stdout, "api: listening")

	// The same exit as another config error.
	w2 := newJobWorld(t, "api: {lisen: \"127.0.0.1:0\"}\n")
	other := w2.run("system", "start")
	require.Equal(t, other.code, r.code, other.String())
	require.True(t, strings.Contains(other.stderr, "unknown key"), other.String())
}

// TestTLSClientRefusesAnExpiredCertificate: a certificate out of date is
// a warning of config check; a client refuses it, saying to renew it.
func TestTLSClientRefusesAnExpiredCertificate(t *testing.T) {
	t.Parallel()
	w := newTLSWorld(t)
	expired := w.ca.IssueValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "ductile.test", "127.0.0.1")
	pkitest.WriteFile(t, w.certFile, expired.CertPEM)
	pkitest.WriteFile(t, w.keyFile, expired.KeyPEM)
	r := w.run("config", "check")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout+r.stderr, "api.tls.cert_file: the certificate expired at")

	d := w.startDaemon()
	addr := apiAddr(t, d)
	c, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: w.caFile, Timeout: cmdTimeout})
	require.NoError(t, err)
	_, err = healthz(t, c, addr, "ductile.test")
	require.ErrorContains(t, err, "the daemon's certificate is expired or not valid yet: renew it")
	w.stopDaemon(d)
}
