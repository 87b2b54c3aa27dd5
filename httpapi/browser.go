package httpapi

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/chatmem/chatmem"
)

// A web page the user visits can make the browser send requests to the
// user's loopback, and a server without API keys answers whoever reaches
// it. browserRules refuses what such a page can make a browser send:
//
//   - a Host that is not a name of this server (a page on a domain that
//     its DNS rebinds to 127.0.0.1 is same-origin with its own domain and
//     reads every answer); checked on every request when no keys are
//     configured. With keys a rebinding page has no key to send, and the
//     Host of a server behind a proxy is the proxy's business.
//   - an Origin of another site, or "null" (a sandboxed frame, a file, a
//     redirect), on every request, unless it is one of the CORS origins
//     the operator configured; with keys or without.
//   - a body that is not JSON (NDJSON for the import) on the routes that
//     take one: a page may POST text/plain, a form or a typeless Blob to
//     any address without asking the server first, but application/json
//     needs a CORS preflight, which only a configured origin passes.
type browserRules struct {
	keyless bool
	hosts   map[string]bool // extra names, lower-case, without port
	origins map[string]bool // CORS origins, as browsers serialize them
}

// newBrowserRules validates the operator's names and origins. Bad ones
// wrap chatmem.ErrInvalid.
func newBrowserRules(keyless bool, hosts, origins []string) (*browserRules, error) {
	b := &browserRules{keyless: keyless, hosts: make(map[string]bool), origins: make(map[string]bool)}
	for _, h := range hosts {
		name, err := parseAllowedHost(h)
		if err != nil {
			return nil, err
		}
		b.hosts[name] = true
	}
	for _, o := range origins {
		origin, err := parseCORSOrigin(o)
		if err != nil {
			return nil, err
		}
		b.origins[origin] = true
	}
	return b, nil
}

// parseAllowedHost returns h as hostName returns a Host's name: a host
// name or IP address, lower-case, any port.
func parseAllowedHost(h string) (string, error) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if ip := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"); net.ParseIP(ip) != nil {
		return ip, nil
	}
	if s == "" || strings.ContainsAny(s, ":/?#@[]*% \t") {
		return "", fmt.Errorf("%w: allowed host %q: want a host name or IP address, without scheme or port (every port is allowed)", chatmem.ErrInvalid, h)
	}
	return s, nil
}

// parseCORSOrigin returns o as a browser sends it in Origin: scheme and
// host in lower case, the scheme's default port left out, nothing after.
func parseCORSOrigin(o string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: CORS origin %q: %s; want scheme://host[:port], such as https://app.example.com", chatmem.ErrInvalid, o, why)
	}
	u, err := url.Parse(strings.TrimSpace(o))
	switch {
	case strings.TrimSpace(o) == "*":
		return "", bad("a wildcard would let every site drive the server; list the origins")
	case err != nil:
		return "", bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("the scheme must be http or https")
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", bad("only a scheme, a host and a port")
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(u.Scheme == "http" && port == "80") && !(u.Scheme == "https" && port == "443") {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// hostName returns the name in a Host header or an Origin's host, lower
// case, without port, brackets or a trailing dot.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// hostAllowed reports whether hostport names this server: localhost or a
// loopback address, the address the request's connection reached, or one
// of the operator's names; with any port.
func (b *browserRules) hostAllowed(r *http.Request, hostport string) bool {
	h := hostName(hostport)
	if h == "" {
		return false
	}
	if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() || b.hosts[h] {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && hostName(local.String()) == h
}

// checkHost refuses a request whose Host is not a name of this server,
// when no API keys are configured. An IP address is never refused: a page
// can rebind a name to the server's address, not an address (and a server
// behind NAT or a published container port is reached under an address
// it does not have). A request without Host (HTTP/1.0) does not come from
// a browser, which always sends one.
func (b *browserRules) checkHost(r *http.Request) error {
	if !b.keyless || r.Host == "" || net.ParseIP(hostName(r.Host)) != nil || b.hostAllowed(r, r.Host) {
		return nil
	}
	return fmt.Errorf("%w: Host %q is not a name of this server; without API keys it answers only localhost, "+
		"IP addresses and the allowed hosts (chatmem serve --allowed-hosts)", ErrForbidden, r.Host)
}

// checkOrigin refuses a request a page of another site sent: its Origin
// is neither one of the CORS origins, nor this server (the Host the
// request came with, or a name hostAllowed accepts), nor a same-origin
// request as the browser itself says (Sec-Fetch-Site, which pages cannot
// set, and which holds where a reverse proxy rewrote the Host). A request
// without Origin is not a page's cross-origin one: browsers send Origin
// with every such request that can change anything or read an answer.
func (b *browserRules) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || b.origins[origin] {
		return nil
	}
	if origin != "null" {
		if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
			return nil
		}
		if u, err := url.Parse(origin); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
			(strings.EqualFold(u.Host, r.Host) || b.hostAllowed(r, u.Host)) {
			return nil
		}
	}
	return fmt.Errorf("%w: Origin %q is another site; a browser app's origin must be listed in the CORS origins (chatmem serve --cors-origins)", ErrForbidden, origin)
}

// corsHeaders lets a configured origin read the answer, errors included.
// Credentials are never allowed: the API's are bearer keys, not cookies.
func (b *browserRules) corsHeaders(w http.ResponseWriter, r *http.Request) {
	if len(b.origins) == 0 {
		return
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if origin := r.Header.Get("Origin"); b.origins[origin] {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "*")
	}
}

// corsMethods are the methods a preflight is told it may use; the request
// itself gets 405 if its path does not serve its method.
const corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE"

// preflight answers a configured origin's CORS preflight (OPTIONS with
// Access-Control-Request-Method), and reports whether it did. The request
// headers it asks for are allowed: the origin is trusted, and the server
// ignores the headers it does not know.
func (b *browserRules) preflight(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if r.Method != http.MethodOptions || !b.origins[origin] || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", corsMethods)
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// bodyTypes are the media types a route's body may be in; nil for a
// request that takes no body. Every POST, PUT and PATCH route takes one:
// JSON, and the import NDJSON or JSON (a file of one line is both).
func bodyTypes(rt route, r *http.Request) []string {
	switch {
	case r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch:
		return nil
	case rt.Method != r.Method && rt.Pattern != mcpPattern:
		return nil // the path's 405: no route of this method reads the body
	case rt.Pattern == importPattern:
		return []string{ndjsonType, "application/json"}
	}
	return []string{"application/json"}
}

// checkContentType refuses a body not in one of types (parameters such as
// charset aside), a missing Content-Type included. An empty body carries
// nothing to refuse: the route says what it lacks.
func checkContentType(r *http.Request, types []string) error {
	if types == nil || r.ContentLength == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && slices.Contains(types, mt) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return fmt.Errorf("%w: Content-Type %s; this route takes %s", ErrUnsupportedMediaType, ct, strings.Join(types, " or "))
}
