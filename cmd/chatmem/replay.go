package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/settings"
)

// replayConfig is everything `chatmem replay` can be told.
type replayConfig struct {
	store, dataDir, tenant, conversation, system string
	seq                                          int
}

// command is replay's list of settings. The store is the deployment's
// (CHATMEM_STORE, CHATMEM_CONFIG), as serve's.
func (c *replayConfig) command() *settings.Command {
	s := storeSettings(&c.store, &c.dataDir, "", true)
	s = append(s,
		settings.Setting{Name: "tenant", Group: "replay", Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "acme",
			Help: "tenant of the conversation"},
		settings.Setting{Name: "conversation", Group: "replay", Value: settings.String(&c.conversation, ""), Example: "c1",
			Help: "the conversation (required)"},
		settings.Setting{Name: "seq", Group: "replay", Value: settings.Int(&c.seq, 0, 0, 1<<62), Example: "12",
			Help: "the sequence number of the proxied reply whose request to rebuild (required)"},
		settings.Setting{Name: "system", Group: "replay", Value: settings.String(&c.system, ""), Example: "system.json",
			Help: "a file holding the request's own system messages as a JSON array, as the request had them (they are not stored; the receipt keeps their digest)"},
	)
	return &settings.Command{
		Name:  "replay",
		Usage: "replay [--store URL] [--data-dir DIR] [--tenant T] --conversation ID --seq N [--system FILE]",
		About: "Rebuilds, from the receipt kept with a proxied reply and the messages the store holds,\n" +
			"the request body the chat proxy sent upstream for that reply, byte for byte, and prints\n" +
			"it. When a message it sent is gone or changed (rewound, purged, redacted) it says which,\n" +
			"and prints nothing (exit 1).",
		Example:   "chatmem replay --store sqlite:chatmem.db --conversation c1 --seq 12 > request.json",
		EnvPrefix: "CHATMEM_REPLAY_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runReplay prints the upstream request of one proxied reply.
func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c replayConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if c.conversation == "" || c.seq < 1 || len(cmd.Args()) > 0 {
		return usageErr("replay needs --conversation and --seq, and no arguments; run chatmem replay --help")
	}
	key := chatmem.Key{Tenant: c.tenant, ID: c.conversation}
	if err := key.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	var system []json.RawMessage
	if c.system != "" {
		b, err := os.ReadFile(c.system)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		if err := json.Unmarshal(b, &system); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--system %s: want a JSON array of messages: %w", c.system, err)}
		}
	}
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	counter, err := newCounter("estimate")
	if err != nil {
		return err
	}
	mem, err := chatmem.New(store, chatmem.Options{Counter: counter, Counters: newCounter, TailCacheBytes: -1})
	if err != nil {
		return err
	}
	body, err := httpapi.ReplayRequest(ctx, mem, key, int64(c.seq), system)
	if err != nil {
		return fmt.Errorf("replay %s seq %d: %w", key.ID, c.seq, err)
	}
	_, err = stdout.Write(append(body, '\n'))
	return err
}
