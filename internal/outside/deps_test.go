package outside

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLightPackages checks what a program pays in dependencies for a
// package it imports alone: tokenizer (for tokenizer.Estimate and the
// tiktoken encodings) links no provider SDK, no telemetry and no server
// machinery; the root package none either; nor does the Go client, which
// links neither the server (httpapi, its inspector, Prometheus, the
// jsonschema of its OpenAPI checks) nor a store.
func TestLightPackages(t *testing.T) {
	goTool := goCommand(t)
	heavy := []string{
		"github.com/anthropics/anthropic-sdk-go",
		"github.com/openai/openai-go",
		"go.opentelemetry.io/",
		"github.com/prometheus/",
		"github.com/santhosh-tekuri/jsonschema",
		"github.com/modelcontextprotocol/go-sdk",
		"github.com/chatmem/chatmem/httpapi", // and httpapi/inspector
		"github.com/chatmem/chatmem/mcpserver",
		"github.com/chatmem/chatmem/sqlite",
		"modernc.org/sqlite",
	}
	for _, pkg := range []string{"github.com/chatmem/chatmem", "github.com/chatmem/chatmem/tokenizer", "github.com/chatmem/chatmem/client"} {
		out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			dep = strings.TrimSpace(dep)
			for _, h := range heavy {
				if strings.HasPrefix(dep, h) {
					t.Errorf("%s depends on %s: a program importing it alone would link that", pkg, dep)
				}
			}
		}
	}
}
