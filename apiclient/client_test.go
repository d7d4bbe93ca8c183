package apiclient_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/internal/pkitest"
)

// serveTLS serves "ok" with pair on 127.0.0.1 and returns its https URL.
func serveTLS(t *testing.T, pair pkitest.Pair) string {
	t.Helper()
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	require.NoError(t, err)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes refused on purpose
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.URL
}

func client(t *testing.T, caFile string) *http.Client {
	t.Helper()
	c, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: caFile, Timeout: 10 * time.Second})
	require.NoError(t, err)
	return c
}

// get returns the body of a GET of url, or the error.
func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestClientTrustsTheCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, "Ductile test CA")
	caFile := filepath.Join(dir, "ca.crt")
	pkitest.WriteFile(t, caFile, ca.PEM)
	url := serveTLS(t, ca.Issue(t, "127.0.0.1", "localhost"))

	body, err := get(client(t, caFile), url)
	require.NoError(t, err)
	require.Equal(t, "ok", body)

	// Without the CA: what to do, and the cause underneath.
	_, err = get(client(t, ""), url)
	var tlsErr *apiclient.TLSError
	require.ErrorAs(t, err, &tlsErr)
	require.Contains(t, err.Error(), "the daemon's certificate is not signed by a CA this machine trusts: pass --ca FILE with the CA that signed it")
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)

	// Another CA's file: which one, and what to give instead.
	other := filepath.Join(dir, "other.crt")
	pkitest.WriteFile(t, other, pkitest.NewCA(t, "Another CA").PEM)
	_, err = get(client(t, other), url)
	require.ErrorContains(t, err, "signed neither by the CA in "+other+" nor by one this machine trusts: pass --ca FILE with the CA that signed")
}

func TestClientExplainsCertificateProblems(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, "Ductile test CA")
	caFile := filepath.Join(dir, "ca.crt")
	pkitest.WriteFile(t, caFile, ca.PEM)
	c := client(t, caFile)

	_, err := get(c, serveTLS(t, ca.Issue(t, "ductile.home.example")))
	require.ErrorContains(t, err, "the daemon's certificate names [ductile.home.example], not 127.0.0.1: call the daemon by a name its certificate has")

	expired := ca.IssueValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "127.0.0.1")
	_, err = get(c, serveTLS(t, expired))
	require.ErrorContains(t, err, "the daemon's certificate is expired or not valid yet: renew it")
}

func TestClientExplainsASchemeMismatch(t *testing.T) {
	ca := pkitest.NewCA(t, "Ductile test CA")
	tlsURL := serveTLS(t, ca.Issue(t, "127.0.0.1"))
	_, err := get(client(t, ""), strings.Replace(tlsURL, "https://", "http://", 1))
	require.ErrorContains(t, err, "speaks TLS: call it with https://")

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "a 400 of the API's own", http.StatusBadRequest)
	}))
	t.Cleanup(plain.Close)
	_, err = get(client(t, ""), strings.Replace(plain.URL, "http://", "https://", 1))
	require.ErrorContains(t, err, "does not speak TLS: configure api.tls there")
	// A 400 of its own is given back whole.
	body, err := get(client(t, ""), plain.URL)
	require.NoError(t, err)
	require.Equal(t, "a 400 of the API's own\n", body)
}

func TestCAFileErrorsSayWhatToGive(t *testing.T) {
	dir := t.TempDir()
	_, err := apiclient.CertPool(filepath.Join(dir, "missing.crt"))
	require.ErrorContains(t, err, "no such file")
	require.ErrorContains(t, err, "give the PEM file of the CA that signed the daemon's certificate")

	key := filepath.Join(dir, "ca.key")
	pkitest.WriteFile(t, key, pkitest.NewCA(t, "x").Issue(t, "x").KeyPEM)
	_, err = apiclient.CertPool(key)
	require.ErrorContains(t, err, "holds a private key, not a certificate")

	junk := filepath.Join(dir, "junk")
	pkitest.WriteFile(t, junk, []byte("not pem"))
	_, err = apiclient.NewHTTPClient(apiclient.Options{CAFile: junk})
	require.ErrorContains(t, err, "holds no PEM certificate")
}
