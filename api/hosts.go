package api

import (
	"net"
	"slices"
	"strings"
)

// hostPolicy is which Host names the API serves (its Host check, against
// DNS rebinding: a page whose name resolves to the daemon's address must
// not reach it). Loopback names are always served; the names of api.hosts
// too. A listener off loopback without api.hosts serves every Host (it is
// reached by whatever names its addresses have), as does the zero policy
// (Handler, without Serve's listener).
type hostPolicy struct {
	restricted bool     // only loopback names and names are served
	names      []string // api.hosts, lower case, without brackets
}

// newHostPolicy is the policy of a listener on addr with api.hosts names.
func newHostPolicy(addr net.Addr, names []string) hostPolicy {
	tcp, ok := addr.(*net.TCPAddr)
	loopback := ok && tcp.IP.IsLoopback()
	return hostPolicy{restricted: loopback || len(names) > 0, names: names}
}

// serves reports whether host (a Host header: name[:port]) is served.
func (p hostPolicy) serves(host string) bool {
	if !p.restricted || loopbackHost(host) {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	return slices.Contains(p.names, host)
}
