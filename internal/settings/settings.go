// Package settings is the configuration of chatmem's commands: one list of
// typed settings per command, from which its flags, environment variables,
// config file keys, --help and docs/configuration.md all derive.
//
// A setting's value comes from its flag if given, else its environment
// variable if set, else the config file's key if present, else its
// default. Every value is parsed by the setting's type (bool, int, float,
// duration, size, choice, list), whatever its source.
package settings

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Setting is one configuration value of a command.
type Setting struct {
	// Name is the flag's name (without dashes) and the config file's key.
	Name string
	// Env is the environment variable; empty means the command's
	// EnvPrefix followed by Name in upper case with _ for -.
	Env string
	// Group heads the setting's section of the help (server, store, ...).
	Group string
	// Help says what the setting does, in one or more lines.
	Help string
	// Value is the typed variable; its value when the Command is parsed
	// is the default.
	Value Value
	// Secret settings are never printed, only said to be set.
	Secret bool
	// Example is a value to show in the docs; empty means the default.
	Example string
}

// Command is one command's settings and help.
type Command struct {
	// Name is the command's name: chatmem NAME.
	Name string
	// Usage is the synopsis after "chatmem "; About describes the
	// command (paragraphs); Example is one command line.
	Usage, About, Example string
	// EnvPrefix starts the environment variables of settings that name
	// none: CHATMEM_ for serve, CHATMEM_BENCH_ for bench.
	EnvPrefix string
	// ConfigEnv is the environment variable naming the config file (the
	// --config flag's); empty means EnvPrefix + CONFIG.
	ConfigEnv string
	// Settings is the command's list, in the order of the help.
	Settings []Setting
	// Shared reports whether a config file key belongs to another
	// command; such keys are skipped, so that one file can configure
	// several commands. Keys neither this command's nor shared are errors.
	Shared func(key string) bool

	defaults map[string]string // Name -> default, as formatted by Value
	from     map[string]string // Name -> where the value came from
	args     []string
	config   string
}

// Source names where each value came from.
const (
	FromDefault = "default"
	FromFlag    = "flag"
	FromFile    = "config file"
)

// Usage errors of Parse are *UsageError: one line, naming the flag,
// variable or key, what it accepts, and where to find the help.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func (c *Command) env(s *Setting) string {
	if s.Env != "" {
		return s.Env
	}
	return c.EnvPrefix + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// EnvName returns the environment variable of the named setting ("" if
// there is no such setting).
func (c *Command) EnvName(name string) string {
	if s := c.lookup(name); s != nil {
		return c.env(s)
	}
	return ""
}

// ConfigEnvName returns the environment variable that names the config
// file.
func (c *Command) ConfigEnvName() string { return c.configEnv() }

func (c *Command) configEnv() string {
	if c.ConfigEnv != "" {
		return c.ConfigEnv
	}
	return c.EnvPrefix + "CONFIG"
}

func (c *Command) lookup(name string) *Setting {
	for i := range c.Settings {
		if c.Settings[i].Name == name {
			return &c.Settings[i]
		}
	}
	return nil
}

func (c *Command) helpHint() string { return "run chatmem " + c.Name + " --help" }

// Parse sets every setting from args (flags and positional arguments in
// any order), the environment (lookupEnv, os.LookupEnv if nil) and the
// config file (--config, or its environment variable). --help returns
// flag.ErrHelp after writing the help to help. Any other failure is a
// *UsageError, and every error of the environment and the config file is
// reported in it, on one line.
//
// Flags may come before, between and after the positional arguments; --
// ends them, and what follows is positional even if it starts with a dash
// (as does a lone -, standard input). A flag takes its value as --name=V or
// --name V, with one dash or two. A boolean flag stands alone (--facts),
// takes --facts=false, or takes the next argument if that is exactly true,
// false, 1 or 0 (--facts false), so that the form of other flags works for
// it too.
func (c *Command) Parse(args []string, lookupEnv func(string) (string, bool), help io.Writer) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	c.defaults = map[string]string{}
	c.from = map[string]string{}
	for i := range c.Settings {
		s := &c.Settings[i]
		if s.Name == "" || s.Value == nil || c.lookup(s.Name) != s || s.Name == "config" || s.Name == "help" || s.Name == "h" {
			panic(fmt.Sprintf("settings: command %s: setting %q is unnamed, untyped or given twice", c.Name, s.Name))
		}
		c.defaults[s.Name] = s.Value.String()
	}
	given, config, configGiven, err := c.parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		c.PrintHelp(help)
		return err
	}
	if err != nil {
		return &UsageError{Msg: fmt.Sprintf("%s: %v; %s", c.Name, err, c.helpHint())}
	}
	if !configGiven {
		config, _ = lookupEnv(c.configEnv())
	}
	c.config = config
	file, err := c.readFile(config)
	if err != nil {
		return &UsageError{Msg: fmt.Sprintf("%s: %v; %s", c.Name, err, c.helpHint())}
	}
	var errs []string
	for i := range c.Settings {
		s := &c.Settings[i]
		switch {
		case given[s.Name]:
			c.from[s.Name] = FromFlag
		case c.envSet(s, lookupEnv):
			env := c.env(s)
			v, _ := lookupEnv(env)
			c.from[s.Name] = env
			if err := s.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v: want %s", env, err, s.Value.Accepts()))
			}
		case file[s.Name] != nil:
			c.from[s.Name] = FromFile
			if err := s.Value.Set(*file[s.Name]); err != nil {
				errs = append(errs, fmt.Sprintf("config file %s: key %q: %v: want %s", config, s.Name, err, s.Value.Accepts()))
			}
		default:
			c.from[s.Name] = FromDefault
		}
	}
	if len(errs) > 0 {
		return &UsageError{Msg: fmt.Sprintf("%s: %s; %s", c.Name, strings.Join(errs, "; "), c.helpHint())}
	}
	return nil
}

// parseArgs sets the flags of args and keeps the rest as the positional
// arguments; it returns the flags given, and the --config flag's value.
func (c *Command) parseArgs(args []string) (given map[string]bool, config string, configGiven bool, err error) {
	given = map[string]bool{}
	c.args = nil
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			c.args = append(c.args, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			c.args = append(c.args, a)
			continue
		}
		name := strings.TrimPrefix(a[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, "", false, fmt.Errorf("bad flag syntax %q", a)
		}
		name, value, hasValue := strings.Cut(name, "=")
		switch name {
		case "help", "h":
			return nil, "", false, flag.ErrHelp
		case "config":
			if !hasValue {
				if i+1 == len(args) {
					return nil, "", false, errors.New("--config needs a value: want a JSON file")
				}
				i++
				value = args[i]
			}
			config, configGiven = value, true
			continue
		}
		s := c.lookup(name)
		if s == nil {
			return nil, "", false, c.unknownFlag(name)
		}
		if b, ok := s.Value.(boolFlag); ok && b.IsBoolFlag() && !hasValue {
			value = "true"
			if i+1 < len(args) && isBoolWord(args[i+1]) {
				i++
				value = args[i]
			}
		} else if !hasValue {
			if i+1 == len(args) {
				return nil, "", false, fmt.Errorf("--%s needs a value: want %s", name, s.Value.Accepts())
			}
			i++
			value = args[i]
		}
		if err := s.Value.Set(value); err != nil {
			return nil, "", false, fmt.Errorf("--%s: %v: want %s", name, err, s.Value.Accepts())
		}
		given[name] = true
	}
	return given, config, configGiven, nil
}

// isBoolWord reports whether a boolean flag takes the argument after it
// as its value: only these four words, so that a file named yes stays a
// file.
func isBoolWord(s string) bool {
	return s == "true" || s == "false" || s == "1" || s == "0"
}

// unknownFlag names the flag and, if one is close, the flag meant.
func (c *Command) unknownFlag(name string) error {
	names := []string{"config"}
	for _, s := range c.Settings {
		names = append(names, s.Name)
	}
	if m := Closest(name, names); m != "" {
		return fmt.Errorf("unknown flag --%s (did you mean --%s?)", name, m)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

func (c *Command) envSet(s *Setting, lookupEnv func(string) (string, bool)) bool {
	_, ok := lookupEnv(c.env(s))
	return ok
}

// Args returns the positional arguments: those that are not flags or
// their values, in order.
func (c *Command) Args() []string { return c.args }

// IsSet reports whether the named setting was given (by flag,
// environment or config file) rather than left at its default.
func (c *Command) IsSet(name string) bool {
	from, ok := c.from[name]
	return ok && from != FromDefault
}

// From returns where the named setting's value came from: "flag", the
// environment variable's name, "config file" or "default".
func (c *Command) From(name string) string { return c.from[name] }

// readFile reads a JSON object of keys to values: strings, numbers or
// booleans, each parsed by its setting's type. A key of no command is an
// error, so that typos do not pass silently.
func (c *Command) readFile(path string) (map[string]*string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: not a JSON object: %v", path, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]*string, len(raw))
	for _, k := range keys {
		if c.lookup(k) == nil {
			if c.Shared != nil && c.Shared(k) {
				continue
			}
			names := make([]string, len(c.Settings))
			for i, s := range c.Settings {
				names[i] = s.Name
			}
			if m := Closest(k, names); m != "" {
				return nil, fmt.Errorf("config file %s: unknown key %q (did you mean %q?)", path, k, m)
			}
			return nil, fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		var v string
		switch x := raw[k].(type) {
		case string:
			v = x
		case bool:
			v = strconv.FormatBool(x)
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			v = strings.Join(parts, ",")
		default:
			return nil, fmt.Errorf("config file %s: key %q must be a string, number, boolean or list", path, k)
		}
		out[k] = &v
	}
	return out, nil
}

// PrintHelp writes the usage, the description, the settings by group with
// their types, defaults and environment variables, and the example.
func (c *Command) PrintHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: chatmem %s\n", c.Usage)
	if c.About != "" {
		fmt.Fprintf(w, "\n%s\n", c.About)
	}
	fmt.Fprintf(w, "\nA flag beats its environment variable, which beats the config file (--config FILE,\nor %s: a JSON object of the keys below), which beats the default. Flags may\ncome before or after the arguments (-- ends them); a flag shown without a type is\nboolean: --name, --name=false, or --name followed by true, false, 1 or 0.\n", c.configEnv())
	for _, g := range c.groups() {
		fmt.Fprintf(w, "\n%s:\n", upperFirst(g))
		for _, s := range c.Settings {
			if s.Group != g {
				continue
			}
			if b, ok := s.Value.(boolFlag); ok && b.IsBoolFlag() {
				fmt.Fprintf(w, "  --%s\n", s.Name)
			} else {
				fmt.Fprintf(w, "  --%s %s\n", s.Name, s.Value.Type())
			}
			for _, l := range strings.Split(s.Help, "\n") {
				fmt.Fprintf(w, "        %s\n", l)
			}
			def := c.Default(s.Name)
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(w, "        (default %s; env %s)\n", def, c.env(&s))
		}
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExample:\n  %s\n", c.Example)
	}
}

// Default returns the named setting's default, as its type formats it:
// the value its variable held before Parse (or now, if not parsed yet).
func (c *Command) Default(name string) string {
	if d, ok := c.defaults[name]; ok {
		return d
	}
	if s := c.lookup(name); s != nil {
		return s.Value.String()
	}
	return ""
}

func (c *Command) groups() []string {
	var gs []string
	for _, s := range c.Settings {
		if !slices.Contains(gs, s.Group) {
			gs = append(gs, s.Group)
		}
	}
	return gs
}

func upperFirst(s string) string {
	if s == "" {
		return "Settings"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Print writes the settings in force, one a line, with where each came
// from; secrets show only whether they are set.
func (c *Command) Print(w io.Writer) {
	for _, s := range c.Settings {
		v := s.Value.String()
		if s.Secret && v != "" {
			v = "(set)"
		}
		fmt.Fprintf(w, "  %s=%s (%s)\n", s.Name, v, c.from[s.Name])
	}
}
