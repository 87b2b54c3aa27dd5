package transfer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/chatmem/chatmem/transfer"
)

// validateSchema checks every line of an export against transfer.Schema.
func validateSchema(t *testing.T, export []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(transfer.Schema))
	if err != nil {
		t.Fatalf("schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile schema.json: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(export))
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("line %d is not JSON: %v", line, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("line %d does not match the schema: %v\n%s", line, err, sc.Bytes())
		}
	}
}

// TestSchemaRefuses: the schema is not a check that passes everything.
func TestSchemaRefuses(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(transfer.Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"format":"chatmem/v2"}`,
		`{"type":"message","seq":0,"role":"user","content":"x","created_at":"2026-01-01T00:00:00Z"}`,
		`{"type":"message","seq":1,"role":"robot","content":"x","created_at":"2026-01-01T00:00:00Z"}`,
		`{"type":"message","seq":1,"role":"user","content":"x","created_at":"2026-01-01T00:00:00.123456789Z"}`,
		`{"type":"fact","key":"Name","value":"x","set_by":"app","confidence":1,"created_at":"2026-01-01T00:00:00Z"}`,
		`{"type":"conversation","id":"/etc","tokenizer":"estimate","last_seq":1,"tokens":1,"system_tokens":0,"turns":1,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`,
		`{"type":"summary","text":"x","covers_seq":1,"tokens":1,"summarizer":"offline","created_at":"2026-01-01T00:00:00Z","extra":1}`,
		`{"type":"user","id":"u-1","facts":[]}`,
		`{"type":"user","id":"u 1","facts":[{"key":"name","value":"x","set_by":"app","confidence":1,"created_at":"2026-01-01T00:00:00Z"}]}`,
		`{"type":"user","id":"u-1","facts":[{"key":"name","value":"x","conversation":"../c","set_by":"app","confidence":1,"created_at":"2026-01-01T00:00:00Z"}]}`,
		`{"type":"user","id":"u-1","facts":[{"key":"name","value":"x","set_by":"app","confidence":1,"created_at":"2026-01-01T00:00:00Z","valid_to":"2026-01-02T00:00:00Z"}]}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(bad), &v); err != nil {
			t.Fatal(err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
}
