package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthcheck runs `chatmem healthcheck` against real HTTP servers that
// answer 200, 503, a redirect, or nothing in time.
func TestHealthcheck(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte(`{"status":"ok"}`))
		case "/down":
			http.Error(w, "store down", http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for /slow

	tests := []struct {
		args []string
		code int
		msg  string // in stderr; empty: stderr must be empty
	}{
		{[]string{"--url", srv.URL + "/healthz"}, 0, ""},
		{[]string{"--url", srv.URL + "/down"}, 1, "chatmem: unhealthy: GET " + srv.URL + "/down answered 503 Service Unavailable\n"},
		{[]string{"--url", srv.URL + "/moved"}, 1, "answered 302 Found\n"},
		{[]string{"--url", srv.URL + "/slow", "--timeout", "50ms"}, 1, "context deadline exceeded"},
		{[]string{"--url", "http://127.0.0.1:1/healthz"}, 1, "chatmem: unhealthy: "},
		{[]string{"--url", "::not a url"}, 2, "healthcheck: "},
		{[]string{"--url", srv.URL + "/healthz", "--timeout", "0s"}, 2, "--timeout: 0s is out of range"},
		{[]string{"--url", srv.URL + "/healthz", "extra"}, 2, "takes no arguments"},
	}
	for _, tt := range tests {
		out, errOut, code := runCLI(t, "", append([]string{"healthcheck"}, tt.args...)...)
		if code != tt.code || out != "" || (tt.msg == "" && errOut != "") || !strings.Contains(errOut, tt.msg) {
			t.Errorf("healthcheck %v: exit %d, stdout %q, stderr %q; want exit %d, stderr with %q", tt.args, code, out, errOut, tt.code, tt.msg)
		}
		if strings.Count(errOut, "\n") > 1 {
			t.Errorf("healthcheck %v: stderr %q is more than one line", tt.args, errOut)
		}
	}
}
