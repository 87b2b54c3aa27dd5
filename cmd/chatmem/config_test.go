package main

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/settings"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's reference from the commands' settings")

const (
	configDoc      = "../../docs/configuration.md"
	generatedBegin = "<!-- BEGIN GENERATED: go test ./cmd/chatmem -run TestConfigurationDoc -update -->\n"
	generatedEnd   = "<!-- END GENERATED -->\n"
)

// TestConfigurationDoc fails when docs/configuration.md's reference is not
// the commands' settings: a setting added, renamed or retyped and not
// documented. -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	// serve first, then the commands on its store, then the tools.
	cmds := settingsOf()
	order := map[string]int{"serve": -3, "purge": -2, "recount": -1}
	slices.SortStableFunc(cmds, func(a, b *settings.Command) int { return order[a.Name] - order[b.Name] })
	var ref bytes.Buffer
	settings.Markdown(&ref, cmds...)
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, generatedBegin), strings.Index(doc, generatedEnd)
	if start < 0 || end < start {
		t.Fatalf("%s lacks the markers %q and %q", configDoc, generatedBegin, generatedEnd)
	}
	want := doc[:start+len(generatedBegin)] + "\n" + ref.String() + "\n" + doc[end:]
	if *update {
		if err := os.WriteFile(configDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s is not the commands' settings; run go test ./cmd/chatmem -run TestConfigurationDoc -update", configDoc)
	}
	for _, c := range settingsOf() {
		for _, s := range c.Settings {
			if !strings.Contains(doc, "| `--"+s.Name+"` |") {
				t.Errorf("%s: setting --%s of %s is undocumented", configDoc, s.Name, c.Name)
			}
		}
	}
}

// TestEveryCommandHasSettings: a command's flags are typed settings, so
// that its help, environment, config file and docs derive from one list.
func TestEveryCommandHasSettings(t *testing.T) {
	for _, c := range commands() {
		if c.settings == nil {
			t.Errorf("command %s declares no settings", c.name)
			continue
		}
		if s := c.settings(); s.Name != c.name {
			t.Errorf("command %s's settings are named %q", c.name, s.Name)
		}
	}
}

// TestSharedEnvironment: the commands that work on a deployment's store
// read serve's CHATMEM_STORE and CHATMEM_CONFIG; bench and eval never
// do, so that they cannot write into it by accident.
func TestSharedEnvironment(t *testing.T) {
	want := map[string]string{"serve": envStore, "mcp": envStore, "purge": envStore, "recount": envStore, "bench": "CHATMEM_BENCH_STORE", "eval": "CHATMEM_EVAL_STORE", "demo": "CHATMEM_DEMO_STORE"}
	for _, c := range settingsOf() {
		if w, ok := want[c.Name]; ok && c.EnvName("store") != w {
			t.Errorf("%s --store reads %s, want %s", c.Name, c.EnvName("store"), w)
		}
	}
}

// TestPurgeFromServeConfig: purge takes the store from serve's config file
// (CHATMEM_CONFIG), skipping serve's own keys, and 30d as its age.
func TestPurgeFromServeConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/chatmem.json"
	body := `{"addr":"127.0.0.1:9999","store":"sqlite:` + dir + `/c.db","workers":8,"older-than":"30d"}`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHATMEM_CONFIG", cfg)
	out, errOut, code := runCLI(t, "", "purge")
	if code != 0 || !strings.HasPrefix(out, "deleted 0 conversations") {
		t.Errorf("purge with serve's config file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(dir + "/c.db"); err != nil {
		t.Errorf("purge did not open the config file's store: %v", err)
	}
}
