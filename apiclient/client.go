// Package apiclient is the client side of the daemon's HTTP API, for
// programs that call it from another machine (ductile worker, a remote
// CLI): an *http.Client that trusts the daemon's CA (--ca) beside the
// system's, whose TLS failures say what to do.
package apiclient

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Options configure NewHTTPClient.
type Options struct {
	// CAFile is a PEM file of CA certificates trusted beside the system's
	// (the --ca flag); "" trusts the system's only.
	CAFile string
	// Timeout bounds each request whole (http.Client.Timeout); 0: none,
	// for long-polls and streams, which bound themselves with a context.
	Timeout time.Duration
}

// NewHTTPClient returns a client for the daemon's API: TLS 1.2 at least,
// trusting the system's CAs and those of opts.CAFile. A request that fails
// for TLS returns a *TLSError saying what to do.
func NewHTTPClient(opts Options) (*http.Client, error) {
	roots, err := CertPool(opts.CAFile)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	return &http.Client{Transport: explaining{next: transport, caFile: opts.CAFile}, Timeout: opts.Timeout}, nil
}

// CertPool is the system's CA certificates plus those of caFile ("" adds
// none). Its errors say what the file should hold.
func CertPool(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system pool here: the file's CAs only
	}
	if caFile == "" {
		return pool, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w: give the PEM file of the CA that signed the daemon's certificate", err)
	}
	if !pool.AppendCertsFromPEM(data) {
		if holdsPrivateKey(data) {
			return nil, fmt.Errorf("--ca %s holds a private key, not a certificate: give the CA's certificate (ca.crt), and keep its key off this machine", caFile)
		}
		return nil, fmt.Errorf("--ca %s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the certificate of the CA that signed the daemon's certificate", caFile)
	}
	return pool, nil
}

// holdsPrivateKey reports whether data has a PEM block of a private key.
func holdsPrivateKey(data []byte) bool {
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return false
		}
		if bytes.HasSuffix([]byte(block.Type), []byte("PRIVATE KEY")) {
			return true
		}
	}
}

// TLSError is a request to the daemon that failed for TLS: the
// certificate is not trusted, names another host, is out of date, or one
// side does not speak TLS. Its message says what to do; Err is the cause.
type TLSError struct {
	Host string // the daemon's host:port
	Hint string // what went wrong and what to do
	Err  error
}

func (e *TLSError) Error() string { return e.Hint + " (" + e.Err.Error() + ")" }

func (e *TLSError) Unwrap() error { return e.Err }

// explaining is a RoundTripper that turns TLS failures into *TLSError.
type explaining struct {
	next   http.RoundTripper
	caFile string
}

// plaintextToTLS is what a Go HTTPS server answers a plaintext request.
const plaintextToTLS = "Client sent an HTTP request to an HTTPS server.\n"

func (x explaining) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := x.next.RoundTrip(r)
	if err != nil {
		if hint := x.hint(r, err); hint != "" {
			return nil, &TLSError{Host: r.URL.Host, Hint: hint, Err: err}
		}
		return nil, err
	}
	if r.URL.Scheme == "http" && resp.StatusCode == http.StatusBadRequest {
		// Peek: the answer is plaintextToTLS alone, or given back whole.
		head, _ := io.ReadAll(io.LimitReader(resp.Body, int64(len(plaintextToTLS))+1))
		if string(head) == plaintextToTLS {
			_ = resp.Body.Close()
			return nil, &TLSError{Host: r.URL.Host, Err: errors.New(strings.TrimSpace(plaintextToTLS)),
				Hint: "the daemon at " + r.URL.Host + " speaks TLS: call it with https:// (and --ca FILE if a CA of your own signed its certificate)"}
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	}
	return resp, nil
}

// hint says what to do about err, a failed request, when TLS is its
// cause; "" otherwise.
func (x explaining) hint(r *http.Request, err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown) && x.caFile == "":
		return "the daemon's certificate is not signed by a CA this machine trusts: pass --ca FILE with the CA that signed it"
	case errors.As(err, &unknown):
		return "the daemon's certificate is signed neither by the CA in " + x.caFile + " nor by one this machine trusts: " +
			"pass --ca FILE with the CA that signed the daemon's certificate (its api.tls.cert_file)"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the daemon's certificate names %s, not %s: call the daemon by a name its certificate has, "+
			"or give it a certificate that names %s (subjectAltName) and add that name to its api.hosts", certificateNames(hostname.Certificate), hostname.Host, hostname.Host)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the daemon's certificate is expired or not valid yet: renew it on the daemon's machine (api.tls.cert_file) and run ductile system reload there, or check this machine's clock"
	case errors.As(err, &invalid):
		return "the daemon's certificate is not valid for this client: " + invalid.Error()
	case errors.As(err, &record) && r.URL.Scheme == "https":
		return "the daemon at " + r.URL.Host + " does not speak TLS: configure api.tls there (docs/remote-workers.md), " +
			"or call it with http:// if its config says api.insecure_plaintext: true"
	}
	return ""
}

// certificateNames lists the names a certificate is valid for.
func certificateNames(c *x509.Certificate) string {
	if c == nil {
		return "other names"
	}
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no name (no subjectAltName)"
	}
	return fmt.Sprint(names)
}
