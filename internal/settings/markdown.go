package settings

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes the reference of the commands' settings: per command and
// group, a table of each setting's flag, type, default, environment
// variable, an example and what it does. docs/configuration.md holds it.
func Markdown(w io.Writer, cmds ...*Command) {
	for i, c := range cmds {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "### chatmem %s\n\n", c.Name)
		fmt.Fprintf(w, "Config file: `--config FILE` or `%s`.\n", c.configEnv())
		for _, g := range c.groups() {
			fmt.Fprintf(w, "\n%s:\n\n", upperFirst(g))
			fmt.Fprintln(w, "| flag and file key | type | default | environment | example | what it does |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|")
			for _, s := range c.Settings {
				if s.Group != g {
					continue
				}
				def := c.Default(s.Name)
				ex := s.Example
				if ex == "" {
					ex = def
				}
				fmt.Fprintf(w, "| `--%s` | %s | %s | `%s` | %s | %s |\n",
					s.Name, cell(s.Value.Type()), code(def), c.env(&s), code(ex), cell(strings.ReplaceAll(s.Help, "\n", " ")))
			}
		}
	}
}

func code(s string) string {
	if s == "" {
		return "(empty)"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
