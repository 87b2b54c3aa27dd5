package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// setting is one configuration value of `chatmem serve`, settable by flag,
// by environment variable or by config file, in that precedence.
type setting struct {
	name  string // flag name and config file key
	envAs string // the environment variable, if not CHATMEM_ + NAME
	def   string
	help  string
	parse func(string) error
	value string // the value in force, for the startup log
	from  string // where it came from: flag, env, file or default
}

func (s *setting) env() string {
	if s.envAs != "" {
		return s.envAs
	}
	return "CHATMEM_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// settings is an ordered set of settings bound to typed variables.
type settings struct {
	list   []*setting
	secret map[string]bool // names whose values are never printed
}

func (ss *settings) add(name, def, help string, parse func(string) error) {
	ss.list = append(ss.list, &setting{name: name, def: def, help: help, parse: parse})
}

// envName makes the last added setting read the named environment variable.
func (ss *settings) envName(env string) { ss.list[len(ss.list)-1].envAs = env }

func (ss *settings) str(p *string, name, def, help string) {
	ss.add(name, def, help, func(v string) error { *p = v; return nil })
}

func (ss *settings) int(p *int, name string, def int, help string) {
	ss.add(name, strconv.Itoa(def), help, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a whole number: %q", v)
		}
		*p = n
		return nil
	})
}

func (ss *settings) bool(p *bool, name string, def bool, help string) {
	ss.add(name, strconv.FormatBool(def), help, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false: %q", v)
		}
		*p = b
		return nil
	})
}

func (ss *settings) duration(p *time.Duration, name string, def time.Duration, help string) {
	ss.add(name, def.String(), help, func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("not a duration like 30s: %q", v)
		}
		*p = d
		return nil
	})
}

// flagSet registers every setting as a string flag whose help names its
// environment variable and config key.
func (ss *settings) flagSet(fs *flag.FlagSet) map[string]*string {
	vals := make(map[string]*string, len(ss.list))
	for _, s := range ss.list {
		help := fmt.Sprintf("%s\n(env %s, config file key %q)", s.help, s.env(), s.name)
		vals[s.name] = fs.String(s.name, s.def, help)
	}
	return vals
}

// resolve applies, for every setting, the flag if given, else the
// environment variable, else the config file's value, else the default.
func (ss *settings) resolve(fs *flag.FlagSet, flags map[string]*string, file map[string]string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	for _, s := range ss.list {
		v, from := s.def, "default"
		if fv, ok := file[s.name]; ok {
			v, from = fv, "config file"
		}
		if ev, ok := os.LookupEnv(s.env()); ok {
			v, from = ev, s.env()
		}
		if given[s.name] {
			v, from = *flags[s.name], "flag"
		}
		if err := s.parse(v); err != nil {
			errs = append(errs, fmt.Errorf("%s (from %s): %w", s.name, from, err))
		}
		s.value, s.from = v, from
	}
	return errors.Join(errs...)
}

// readConfigFile reads a JSON object of setting names to values (strings,
// numbers or booleans). Unknown keys are an error, so typos do not pass
// silently.
func (ss *settings) readConfigFile(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	known := map[string]bool{}
	for _, s := range ss.list {
		known[s.name] = true
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		if !known[k] {
			return nil, fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		switch v := v.(type) {
		case string:
			out[k] = v
		case bool:
			out[k] = strconv.FormatBool(v)
		case float64:
			out[k] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return nil, fmt.Errorf("config file %s: key %q must be a string, number or boolean", path, k)
		}
	}
	return out, nil
}

// print writes the settings in force and where each came from, hiding
// secrets.
func (ss *settings) print(w io.Writer) {
	names := make([]string, 0, len(ss.list))
	byName := map[string]*setting{}
	for _, s := range ss.list {
		names = append(names, s.name)
		byName[s.name] = s
	}
	sort.Strings(names)
	for _, n := range names {
		s := byName[n]
		v := s.value
		if ss.secret[n] && v != "" {
			v = "(set)"
		}
		fmt.Fprintf(w, "  %s=%s (%s)\n", n, v, s.from)
	}
}
