package settings

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"0d", 0, true},
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"0", 0, true},
		{" 2h ", 2 * time.Hour, true},
		{"", 0, false},
		{"30", 0, false},
		{"d", 0, false},
		{"soon", 0, false},
		{"1d-2h", 0, false},
		{"1e3d", 0, false},
		{"1dd", 0, false},
		{"99999999999d", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok %t", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for _, d := range []time.Duration{0, time.Second, 90 * time.Second, time.Minute, 2 * time.Hour, 30 * 24 * time.Hour, 36 * time.Hour, 1500 * time.Millisecond} {
		s := FormatDuration(d)
		if back, err := ParseDuration(s); err != nil || back != d {
			t.Errorf("FormatDuration(%v) = %q, which parses back as %v, %v", d, s, back, err)
		}
	}
	if s := FormatDuration(30 * 24 * time.Hour); s != "30d" {
		t.Errorf("FormatDuration(720h) = %q, want 30d", s)
	}
	if s := FormatDuration(time.Minute); s != "1m" {
		t.Errorf("FormatDuration(1m) = %q, want 1m", s)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4MiB", 4 << 20, true},
		{"4mib", 4 << 20, true},
		{"4 MiB", 4 << 20, true},
		{"256KiB", 256 << 10, true},
		{"1.5GiB", 3 << 29, true},
		{"1GB", 1e9, true},
		{"10kB", 10000, true},
		{"100B", 100, true},
		{"4194304", 4 << 20, true},
		{"0", 0, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"lots", 0, false},
		{"4XB", 0, false},
		{"1.3B", 0, false},
		{"1e3", 0, false},
		{"9999999TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %t", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for n, want := range map[int64]string{4 << 20: "4MiB", 256 << 10: "256KiB", 1000: "1000", 0: "0", 1 << 30: "1GiB"} {
		if s := FormatSize(n); s != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, s, want)
		}
	}
}

// TestValues sets each type of value from good and bad strings: a good
// one changes the variable, a bad one is an error that leaves it alone.
func TestValues(t *testing.T) {
	var (
		s   string
		b   bool
		n   int
		f   float64
		d   time.Duration
		z   int64
		l   []string
		ns  []int
		pos time.Duration
	)
	tests := []struct {
		name string
		v    Value
		in   string
		ok   bool
		want string // String() after a good Set
	}{
		{"string", String(&s, "x"), "hello", true, "hello"},
		{"choice", Choice(&s, "text", "text", "json"), "json", true, "json"},
		{"choice bad", Choice(&s, "text", "text", "json"), "yaml", false, ""},
		{"bool true", Bool(&b, false), "true", true, "true"},
		{"bool 0", Bool(&b, true), "0", true, "false"},
		{"bool bad", Bool(&b, false), "maybe", false, ""},
		{"int", Int(&n, 1, 0, 10), "7", true, "7"},
		{"int low", Int(&n, 1, 1, 10), "0", false, ""},
		{"int high", Int(&n, 1, 1, 10), "11", false, ""},
		{"int word", Int(&n, 1, 1, 10), "many", false, ""},
		{"int unbounded", Int(&n, 1, math.MinInt, math.MaxInt), "-5", true, "-5"},
		{"float", Float(&f, 0, 0), "0.5", true, "0.5"},
		{"float negative", Float(&f, 0, 0), "-1", false, ""},
		{"float NaN", Float(&f, 0, 0), "NaN", false, ""},
		{"duration days", Duration(&d, 0, false), "30d", true, "30d"},
		{"duration zero", Duration(&d, time.Second, false), "0", true, "0"},
		{"duration negative", Duration(&d, 0, false), "-1s", false, ""},
		{"positive duration zero", Duration(&pos, time.Second, true), "0s", false, ""},
		{"duration bad", Duration(&d, 0, false), "soon", false, ""},
		{"size", Size(&z, 0, 0, 1<<30), "4MiB", true, "4MiB"},
		{"size too big", Size(&z, 0, 0, 1<<20), "2MiB", false, ""},
		{"size negative", Size(&z, 0, 0, 1<<20), "-1", false, ""},
		{"list", List(&l, nil, "rules", "openai", "none"), "rules, openai", true, "rules,openai"},
		{"list bad", List(&l, nil, "rules", "openai"), "rules,magic", false, ""},
		{"ints", IntList(&ns, nil, 1), "512,1024", true, "512,1024"},
		{"ints bad", IntList(&ns, nil, 1), "512,0", false, ""},
	}
	for _, tt := range tests {
		before := tt.v.String()
		err := tt.v.Set(tt.in)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: Set(%q) = %v, want nil", tt.name, tt.in, err)
		case tt.ok && tt.v.String() != tt.want:
			t.Errorf("%s: after Set(%q), String() = %q, want %q", tt.name, tt.in, tt.v.String(), tt.want)
		case !tt.ok && err == nil:
			t.Errorf("%s: Set(%q) = nil, want an error", tt.name, tt.in)
		case !tt.ok && tt.v.String() != before:
			t.Errorf("%s: a failed Set(%q) changed the value from %q to %q", tt.name, tt.in, before, tt.v.String())
		}
	}
}

// config is a command with one setting of each type, as the commands
// declare theirs.
type config struct {
	addr     string
	insecure bool
	workers  int
	timeout  time.Duration
	body     int64
	format   string
	rate     float64
	names    []string
}

func (c *config) command() *Command {
	return &Command{
		Name: "serve", Usage: "serve [flags]", About: "Serves.", Example: "chatmem serve", EnvPrefix: "CHATMEM_",
		Shared: func(key string) bool { return key == "older-than" },
		Settings: []Setting{
			{Name: "addr", Group: "server", Help: "address to listen on", Value: String(&c.addr, "127.0.0.1:8080")},
			{Name: "insecure", Group: "server", Help: "listen beyond loopback without keys", Value: Bool(&c.insecure, false)},
			{Name: "workers", Group: "summaries and facts", Help: "workers", Value: Int(&c.workers, 4, 1, 1024)},
			{Name: "read-timeout", Group: "limits", Help: "time to read a request", Value: Duration(&c.timeout, 30*time.Second, false)},
			{Name: "max-body-bytes", Group: "limits", Help: "largest body", Value: Size(&c.body, 4<<20, 1, 1<<30)},
			{Name: "log-format", Group: "logging", Help: "log format", Value: Choice(&c.format, "text", "text", "json")},
			{Name: "rate-limit", Group: "limits", Help: "rate", Value: Float(&c.rate, 0, 0)},
			{Name: "extractors", Group: "summaries and facts", Help: "extractors", Value: List(&c.names, []string{"rules"}, "rules", "openai", "none"), Env: "CHATMEM_FACTS"},
		},
	}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chatmem.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPrecedence: a flag beats the environment, which beats the config
// file, which beats the default; each source is typed alike.
func TestPrecedence(t *testing.T) {
	file := writeConfig(t, `{"addr":"127.0.0.1:1111","workers":8,"read-timeout":"1d","max-body-bytes":"1MiB","log-format":"json","rate-limit":2.5,"extractors":["rules","openai"],"insecure":true,"older-than":"30d"}`)
	var c config
	cmd := c.command()
	err := cmd.Parse([]string{"--config", file, "--workers", "16", "--max-body-bytes=2MiB", "rest"},
		env(map[string]string{"CHATMEM_WORKERS": "32", "CHATMEM_READ_TIMEOUT": "90s", "CHATMEM_LOG_FORMAT": "text"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name, got, want, from string
	}{
		{"addr", c.addr, "127.0.0.1:1111", FromFile},
		{"insecure", strconv.FormatBool(c.insecure), "true", FromFile},
		{"workers", strconv.Itoa(c.workers), "16", FromFlag},
		{"read-timeout", c.timeout.String(), "1m30s", "CHATMEM_READ_TIMEOUT"},
		{"max-body-bytes", strconv.Itoa(int(c.body)), strconv.Itoa(2 << 20), FromFlag},
		{"log-format", c.format, "text", "CHATMEM_LOG_FORMAT"},
		{"rate-limit", strconv.FormatFloat(c.rate, 'f', -1, 64), "2.5", FromFile},
		{"extractors", strings.Join(c.names, ","), "rules,openai", FromFile},
	}
	for _, ck := range checks {
		if ck.got != ck.want || cmd.From(ck.name) != ck.from {
			t.Errorf("%s = %s from %s, want %s from %s", ck.name, ck.got, cmd.From(ck.name), ck.want, ck.from)
		}
	}
	if a := cmd.Args(); len(a) != 1 || a[0] != "rest" {
		t.Errorf("Args() = %q, want [rest]", a)
	}

	// Defaults, with nothing set; the config file from its variable.
	var d config
	cmd = d.command()
	if err := cmd.Parse(nil, env(map[string]string{"CHATMEM_CONFIG": writeConfig(t, `{"addr":"127.0.0.1:2222"}`)}), nil); err != nil {
		t.Fatal(err)
	}
	if d.addr != "127.0.0.1:2222" || d.workers != 4 || d.timeout != 30*time.Second || d.body != 4<<20 || d.format != "text" || len(d.names) != 1 {
		t.Errorf("defaults: %+v", d)
	}
	if cmd.IsSet("workers") || !cmd.IsSet("addr") {
		t.Errorf("IsSet(workers) = %t, IsSet(addr) = %t; want false, true", cmd.IsSet("workers"), cmd.IsSet("addr"))
	}
}

// TestBoolFlagStandsAlone: --insecure needs no value, and the flag after
// it is still a flag.
func TestBoolFlagStandsAlone(t *testing.T) {
	var c config
	cmd := c.command()
	if err := cmd.Parse([]string{"--insecure", "--addr", "0.0.0.0:8080"}, env(nil), nil); err != nil {
		t.Fatal(err)
	}
	if !c.insecure || c.addr != "0.0.0.0:8080" || len(cmd.Args()) != 0 {
		t.Errorf("insecure=%t addr=%s args=%q; want true, 0.0.0.0:8080, none", c.insecure, c.addr, cmd.Args())
	}
	var f config
	if err := f.command().Parse([]string{"--insecure=false"}, env(map[string]string{"CHATMEM_INSECURE": "true"}), nil); err != nil || f.insecure {
		t.Errorf("--insecure=false over the environment's true: insecure=%t, %v", f.insecure, err)
	}
}

// TestFlagsAnywhere: flags may follow and surround the positional
// arguments, -- ends them, and a boolean flag takes a following true,
// false, 1 or 0 as its value (and nothing else).
func TestFlagsAnywhere(t *testing.T) {
	tests := []struct {
		args     []string
		insecure bool
		workers  int
		rest     []string
	}{
		{[]string{"file.json", "--insecure"}, true, 4, []string{"file.json"}},
		{[]string{"--workers", "8", "file.json", "--insecure", "true"}, true, 8, []string{"file.json"}},
		{[]string{"--insecure", "true", "file.json"}, true, 4, []string{"file.json"}},
		{[]string{"--insecure", "false", "file.json"}, false, 4, []string{"file.json"}},
		{[]string{"--insecure", "1", "a", "--workers=2", "b"}, true, 2, []string{"a", "b"}},
		{[]string{"--insecure", "0"}, false, 4, nil},
		{[]string{"--insecure", "yes"}, true, 4, []string{"yes"}},
		{[]string{"-insecure", "-workers", "3", "-"}, true, 3, []string{"-"}},
		{[]string{"a", "--", "--insecure", "-x"}, false, 4, []string{"a", "--insecure", "-x"}},
		{[]string{"--insecure=false", "true"}, false, 4, []string{"true"}},
	}
	for _, tt := range tests {
		var c config
		cmd := c.command()
		if err := cmd.Parse(tt.args, env(nil), nil); err != nil {
			t.Errorf("Parse(%q) = %v", tt.args, err)
			continue
		}
		if c.insecure != tt.insecure || c.workers != tt.workers || strings.Join(cmd.Args(), " ") != strings.Join(tt.rest, " ") {
			t.Errorf("Parse(%q): insecure=%t workers=%d args=%q; want %t, %d, %q", tt.args, c.insecure, c.workers, cmd.Args(), tt.insecure, tt.workers, tt.rest)
		}
	}
	// --config after an argument is still the config file.
	var c config
	if err := c.command().Parse([]string{"rest", "--config", writeConfig(t, `{"workers":9}`)}, env(nil), nil); err != nil || c.workers != 9 {
		t.Errorf("--config after an argument: workers=%d, %v; want 9", c.workers, err)
	}
	// --help anywhere is the help.
	var out bytes.Buffer
	if err := c.command().Parse([]string{"rest", "--workers", "2", "-h"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage:") {
		t.Errorf("-h after an argument: %v, help %q", err, out.String())
	}
}

func TestClosest(t *testing.T) {
	names := []string{"CHATMEM_STORE", "CHATMEM_DATA_DIR", "CHATMEM_ADDR", "CHATMEM_API_KEYS"}
	for in, want := range map[string]string{
		"CHATMEM_STOR":     "CHATMEM_STORE",
		"CHATMEM_SOTRE":    "CHATMEM_STORE",
		"CHATMEM_DATADIR":  "CHATMEM_DATA_DIR",
		"CHATMEM_API_KEY":  "CHATMEM_API_KEYS",
		"CHATMEM_WHATEVER": "",
		"CHATMEM_STORE":    "",
	} {
		if got := Closest(in, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Closest("bugdet", []string{"budget", "turns"}); got != "budget" {
		t.Errorf("Closest(bugdet) = %q, want budget", got)
	}
}

// TestBadValues: each bad value is one line naming the flag, variable or
// key, what it accepts, and the command's help.
func TestBadValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string
	}{
		{"int flag", []string{"--workers", "many"}, nil, "", []string{"serve: --workers:", `"many" is not a whole number`, "want a whole number from 1 to 1024"}},
		{"duration flag", []string{"--read-timeout=soon"}, nil, "", []string{"--read-timeout:", "a duration such as"}},
		{"size flag", []string{"--max-body-bytes", "big"}, nil, "", []string{"--max-body-bytes:", "4MiB"}},
		{"bool flag", []string{"--insecure=maybe"}, nil, "", []string{"--insecure:", "true or false"}},
		{"choice flag", []string{"--log-format", "yaml"}, nil, "", []string{"--log-format:", "one of text, json"}},
		{"unknown flag", []string{"--bogus"}, nil, "", []string{"unknown flag --bogus"}},
		{"misspelled flag", []string{"--wokrers", "8"}, nil, "", []string{"unknown flag --wokrers (did you mean --workers?)"}},
		{"bad flag syntax", []string{"---addr"}, nil, "", []string{`bad flag syntax "---addr"`}},
		{"missing value", []string{"--addr"}, nil, "", []string{"--addr needs a value"}},
		{"missing value after an argument", []string{"rest", "--workers"}, nil, "", []string{"--workers needs a value: want a whole number"}},
		{"bool flag bad word", []string{"--insecure=yes please"}, nil, "", []string{`--insecure: "yes please" is not a boolean`}},
		{"env", nil, map[string]string{"CHATMEM_READ_TIMEOUT": "30"}, "", []string{"CHATMEM_READ_TIMEOUT:", `"30" is not a duration`}},
		{"renamed env", nil, map[string]string{"CHATMEM_FACTS": "magic"}, "", []string{"CHATMEM_FACTS:", "rules, openai, none"}},
		{"file", nil, nil, `{"workers":0}`, []string{`key "workers"`, "0 is out of range"}},
		{"file duration number", nil, nil, `{"read-timeout":30}`, []string{`key "read-timeout"`, "not a duration"}},
		{"file unknown key", nil, nil, `{"adr":"x"}`, []string{`unknown key "adr" (did you mean "addr"?)`}},
		{"file not JSON", nil, nil, `addr = x`, []string{"not a JSON object"}},
		{"file object value", nil, nil, `{"addr":{}}`, []string{`key "addr" must be`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeConfig(t, tt.file)}, args...)
			}
			var c config
			err := c.command().Parse(args, env(tt.env), nil)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("Parse = %v, want a *UsageError", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasSuffix(msg, "; run chatmem serve --help") {
				t.Errorf("error %q: want one line ending in the help hint", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestHelp: --help groups the settings and shows each one's type, default
// and environment variable.
func TestHelp(t *testing.T) {
	var c config
	var out bytes.Buffer
	if err := c.command().Parse([]string{"--help"}, env(nil), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(--help) = %v, want flag.ErrHelp", err)
	}
	help := out.String()
	order := []string{"Usage: chatmem serve", "Server:", "--addr string", "(default 127.0.0.1:8080; env CHATMEM_ADDR)",
		"--insecure\n", "Summaries and facts:", "--workers int", "--extractors list", "env CHATMEM_FACTS", "Limits:", "--read-timeout duration", "(default 30s;",
		"--max-body-bytes size", "(default 4MiB;", "--rate-limit float", "Logging:", "--log-format text|json", "Example:"}
	at := 0
	for _, w := range order {
		i := strings.Index(help[at:], w)
		if i < 0 {
			t.Fatalf("help lacks %q after position %d:\n%s", w, at, help)
		}
		at += i + len(w)
	}
}

// TestPrint hides secrets and says where each value came from.
func TestPrint(t *testing.T) {
	var key string
	cmd := &Command{Name: "x", EnvPrefix: "X_", Settings: []Setting{
		{Name: "key", Value: String(&key, ""), Secret: true},
	}}
	if err := cmd.Parse(nil, env(map[string]string{"X_KEY": "s3cret"}), nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Print(&out)
	if got := out.String(); got != "  key=(set) (X_KEY)\n" {
		t.Errorf("Print = %q", got)
	}
}

func TestMarkdown(t *testing.T) {
	var c config
	var out bytes.Buffer
	Markdown(&out, c.command())
	md := out.String()
	for _, w := range []string{"### chatmem serve", "`CHATMEM_CONFIG`", "| `--read-timeout` | duration | `30s` | `CHATMEM_READ_TIMEOUT` |", "| `--log-format` | text\\|json |"} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown lacks %q:\n%s", w, md)
		}
	}
}
