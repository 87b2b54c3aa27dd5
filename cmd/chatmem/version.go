package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/chatmem/chatmem/internal/buildinfo"
	"github.com/chatmem/chatmem/internal/settings"
)

// versionConfig is everything `chatmem version` can be told.
type versionConfig struct{ json bool }

// command is version's list of settings.
func (c *versionConfig) command() *settings.Command {
	return &settings.Command{
		Name: "version", Usage: "version [--json]", Example: "chatmem version", EnvPrefix: "CHATMEM_VERSION_",
		About: "Prints the module version, the VCS revision and time and the Go version of this build.",
		Settings: []settings.Setting{
			{Name: "json", Group: "version", Value: settings.Bool(&c.json, false), Example: "true",
				Help: "print the fields as JSON, as GET /v1/version does"},
		},
	}
}

// runVersion prints which chatmem this is: one line, or the JSON GET
// /v1/version answers with --json.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c versionConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("version takes no arguments; run chatmem version --help")
	}
	info := buildinfo.Read()
	if c.json {
		return json.NewEncoder(stdout).Encode(info)
	}
	_, err := fmt.Fprintln(stdout, info)
	return err
}
