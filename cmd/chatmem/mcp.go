package main

import (
	"context"
	"errors"
	"io"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/mcpserver"
)

// mcpSettings are the settings of `chatmem serve` that `chatmem mcp` takes
// too (the rest are about HTTP); the others keep their defaults.
var mcpSettings = map[string]bool{
	"store": true, "data-dir": true, "tokenizer": true, "summarizer": true, "extractors": true,
	"llm-base-url": true, "llm-model": true, "llm-api-key": true,
	"embedder": true, "embedding-model": true, "embedding-dimensions": true,
	"summary-trigger": true, "summary-target": true, "tail-cache-bytes": true, "workers": true,
	"log-format": true, "log-level": true, "max-messages": true, "max-content-bytes": true,
	"anthropic-api-key": true, "anthropic-model": true, "anthropic-base-url": true,
}

// mcpConfig is everything `chatmem mcp` can be told: serve's memory
// settings and the tenant.
type mcpConfig struct {
	serve  serveConfig
	tenant string
}

// command is mcp's list of settings: serve's, those of mcpSettings, with
// serve's environment variables and config file, and the tenant.
func (c *mcpConfig) command() *settings.Command {
	var s []settings.Setting
	for _, x := range c.serve.command().Settings {
		if mcpSettings[x.Name] {
			s = append(s, x)
		}
	}
	s = append(s, settings.Setting{Name: "tenant", Group: groupServer, Value: settings.String(&c.tenant, chatmem.DefaultTenant), Example: "me",
		Help: "the tenant whose conversations the client reaches"})
	return &settings.Command{
		Name:  "mcp",
		Usage: "mcp [--store URL] [--tenant T] [--config FILE] [flags]",
		About: "Serves chatmem's memory over the Model Context Protocol on stdin and stdout, for an MCP\n" +
			"client that starts it (Claude Desktop, Cursor, an agent SDK); logs go to stderr. The tools\n" +
			"and resources are those `chatmem serve` serves at /mcp (docs/mcp.md). Its settings are\n" +
			"serve's, with serve's environment variables and config file.",
		Example:   `chatmem mcp --store sqlite:/home/me/chatmem.db --tenant me`,
		EnvPrefix: "CHATMEM_", ConfigEnv: envConfig,
		Settings: s,
	}
}

// runMCP serves MCP on stdin and stdout for one tenant, the way a desktop
// client runs a local server; logs go to stderr.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var m mcpConfig
	cmd := m.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("mcp takes no arguments; run chatmem mcp --help")
	}
	c, tenant := m.serve, &m.tenant
	if err := chatmem.ValidateID(*tenant); err != nil {
		return usageErr("--tenant: %v", err)
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer redisLog.route(log)()
	tracer, stopTracing, otelCfg, err := startTracing(ctx, c.store, log, c.shutdownTimeout)
	if err != nil {
		return err
	}
	defer stopTracing()
	store, mem, err := openMemory(ctx, c, log, tracer)
	if errors.Is(err, chatmem.ErrInvalid) {
		return &exitError{code: 2, err: err}
	}
	if err != nil {
		return err
	}
	defer store.Close()
	defer mem.Close()
	srv, err := mcpserver.New(mem, *tenant, mcpserver.Options{Logger: log, Version: buildVersion(), Tracer: tracer})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	log.Info("chatmem mcp serving on stdio", "store", describeStore(c.store, c.dataDir), "tenant", *tenant, "otel", otelCfg.String())
	// mcpserver's transport answers a malformed line and goes on, where
	// the SDK's would end the session.
	err = srv.Run(ctx, &mcpserver.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}, Logger: log})
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // the client closed stdin, or a signal ended the session
	}
	return err
}

// nopWriteCloser leaves stdout open when the session closes its writer.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// buildVersion is the module version the binary was built from ("dev" for
// a build from a working tree).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
