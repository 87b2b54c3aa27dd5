package main

import (
	"errors"
	"flag"
	"io"
	"os"

	"github.com/chatmem/chatmem/internal/settings"
)

// The groups of settings in the help and in docs/configuration.md.
const (
	groupServer  = "server"
	groupStore   = "store"
	groupProxy   = "proxy"
	groupDerived = "summaries and facts"
	groupLimits  = "limits"
	groupLogging = "logging"
)

// The environment variables shared by the commands that work on a
// deployment's store (serve, purge, recount, ...): one CHATMEM_STORE and
// one config file configure them all.
const (
	envStore   = "CHATMEM_STORE"
	envDataDir = "CHATMEM_DATA_DIR"
	envConfig  = "CHATMEM_CONFIG"
)

// storeSettings are the store URL and the default SQLite store's
// directory. With shared, they read CHATMEM_STORE and CHATMEM_DATA_DIR,
// as serve does; otherwise the command's own variables, so that a bench or
// an eval never writes into the deployment's store by accident.
func storeSettings(store, dataDir *string, defStore string, shared bool) []settings.Setting {
	s := []settings.Setting{
		{Name: "store", Group: groupStore, Value: settings.String(store, defStore), Help: storeURLHelp, Example: "postgres://localhost/chatmem"},
		{Name: "data-dir", Group: groupStore, Value: settings.String(dataDir, defaultDataDir), Help: "data directory of the default SQLite store (with an empty --store)", Example: "/var/lib/chatmem"},
	}
	if shared {
		s[0].Env, s[1].Env = envStore, envDataDir
	}
	return s
}

// settingsOf returns every command's settings, each bound to a throwaway
// config: for the docs, and to tell a config file key of another command
// from a typo.
func settingsOf() []*settings.Command {
	var out []*settings.Command
	for _, c := range commands() {
		if c.settings != nil {
			out = append(out, c.settings())
		}
	}
	return out
}

// sharedKey reports whether key is a setting of any command: one config
// file may configure serve and the maintenance commands alike.
func sharedKey(key string) bool {
	for _, c := range settingsOf() {
		if c.EnvName(key) != "" {
			return true
		}
	}
	return false
}

// parseSettings parses a command's arguments, environment and config file
// into its settings: --help prints the help on stderr and exits 0, a bad
// value, or a CHATMEM_ variable no command reads (checkEnv), is one line
// and exit 2.
func parseSettings(cmd *settings.Command, args []string, stderr io.Writer) error {
	if cmd.Shared == nil {
		cmd.Shared = sharedKey
	}
	err := cmd.Parse(args, nil, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	return checkEnv(cmd, os.Environ(), stderr)
}
