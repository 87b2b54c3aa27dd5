package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/buildinfo"
	"github.com/chatmem/chatmem/memstore"
)

// TestVersion checks GET /v1/version and the chatmem_build_info metric
// against the build the test binary records, on a server with API keys:
// neither needs one.
func TestVersion(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
	want := buildinfo.Read()

	r := ts.raw(t, "GET", "/v1/version", "", nil, "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/version = %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	var got buildinfo.Info
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("GET /v1/version: %v in %s", err, r.body)
	}
	if got != want {
		t.Errorf("GET /v1/version = %+v, want %+v", got, want)
	}
	for _, field := range []string{`"version":`, `"revision":`, `"time":`, `"modified":`, `"go_version":`} {
		if !strings.Contains(string(r.body), field) {
			t.Errorf("GET /v1/version = %s, lacks %s", r.body, field)
		}
	}

	m := string(ts.raw(t, "GET", "/metrics", "", nil, "").body)
	line := fmt.Sprintf(`chatmem_build_info{go_version=%q,revision=%q,version=%q} 1`, want.GoVersion, want.Revision, want.Version)
	if !strings.Contains(m, line+"\n") {
		t.Errorf("/metrics lacks %s", line)
	}
}
