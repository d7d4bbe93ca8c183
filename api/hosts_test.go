package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/config"
)

// On loopback with api.hosts, the listed names are served as well as
// loopback ones; any other name is refused with what to do.
func TestHostCheckServesAPIHosts(t *testing.T) {
	f := start(t, func(o *api.Options) { o.Settings.Hosts = []string{"ductile.home.example"} })
	for _, host := range []string{"ductile.home.example:8443", "DUCTILE.home.example", "localhost:1", "127.0.0.1"} {
		require.Equal(t, 200, f.do("GET", "/healthz", "", nil, "Host", host).status, host)
	}
	r := f.do("GET", "/jobs", "admin", nil, "Host", "rebound.example")
	requireError(t, r, 403, "forbidden")
	require.Contains(t, r.body["hint"], "api.hosts")
}

// The document's server is https with api.tls, named by the first of
// api.hosts when there are some.
func TestOpenAPIServerURLFollowsTLSAndHosts(t *testing.T) {
	tls := config.APITLS{CertFile: "/c.pem", KeyFile: "/k.pem"}
	for _, c := range []struct {
		set  config.APIServer
		want string
	}{
		{config.APIServer{Listen: "127.0.0.1:8443", TLS: tls}, "https://127.0.0.1:8443"},
		{config.APIServer{Listen: "0.0.0.0:8443", TLS: tls}, "https://localhost:8443"},
		{config.APIServer{Listen: "0.0.0.0:8443", TLS: tls, Hosts: []string{"ductile.home.example", "box"}}, "https://ductile.home.example:8443"},
		{config.APIServer{Listen: "127.0.0.1:8080", Hosts: []string{"fd00::1"}}, "http://[fd00::1]:8080"},
	} {
		require.Equal(t, c.want, api.New(api.Options{Settings: c.set}).OpenAPI().Servers[0].URL)
	}
}
