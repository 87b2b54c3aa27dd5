package main

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/mcpserver"
)

// mcpSettings are the settings of `chatmem serve` that `chatmem mcp` takes
// too (the rest are about HTTP); the others keep their defaults.
var mcpSettings = map[string]bool{
	"store": true, "data-dir": true, "tokenizer": true, "summarizer": true, "extractors": true,
	"llm-base-url": true, "llm-model": true, "llm-api-key": true,
	"embedder": true, "embedding-model": true, "embedding-dimensions": true,
	"summary-trigger": true, "summary-target": true, "tail-cache-mb": true, "workers": true,
	"log-format": true, "log-level": true, "max-messages": true, "max-content-bytes": true,
	"anthropic-api-key": true, "anthropic-model": true, "anthropic-base-url": true,
}

// runMCP serves MCP on stdin and stdout for one tenant, the way a desktop
// client runs a local server; logs go to stderr.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c serveConfig
	all := c.settings()
	ss := &settings{secret: all.secret}
	for _, s := range all.list {
		if mcpSettings[s.name] {
			ss.list = append(ss.list, s)
		} else if err := s.parse(s.def); err != nil {
			return err
		}
	}
	fs := newFlagSet("mcp",
		"mcp [--store URL] [--tenant T] [--config FILE] [flags]\n\n"+
			"Serves chatmem's memory over the Model Context Protocol on stdin and stdout, for an MCP\n"+
			"client that starts it (Claude Desktop, Cursor, an agent SDK); logs go to stderr. The tools\n"+
			"and resources are those `chatmem serve` serves at /mcp (docs/mcp.md). Settings also come\n"+
			"from the environment or a config file, as for serve.",
		`chatmem mcp --store sqlite:/home/me/chatmem.db --tenant me`, stderr)
	tenant := fs.String("tenant", envOr("CHATMEM_TENANT", chatmem.DefaultTenant), "the tenant whose conversations the client reaches (env CHATMEM_TENANT)")
	configPath := fs.String("config", os.Getenv("CHATMEM_CONFIG"), "JSON config file (env CHATMEM_CONFIG)")
	flags := ss.flagSet(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("mcp takes no arguments")
	}
	// The file may be the one serve reads: every serve key is known.
	file, err := all.readConfigFile(*configPath)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := ss.resolve(fs, flags, file); err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := chatmem.ValidateID(*tenant); err != nil {
		return usageErr("tenant: %v", err)
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	store, mem, err := openMemory(ctx, c, log)
	if errors.Is(err, chatmem.ErrInvalid) {
		return &exitError{code: 2, err: err}
	}
	if err != nil {
		return err
	}
	defer store.Close()
	defer mem.Close()
	srv, err := mcpserver.New(mem, *tenant, mcpserver.Options{Logger: log, Version: buildVersion()})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	log.Info("chatmem mcp serving on stdio", "store", storeName(c.store), "tenant", *tenant)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // the client closed stdin, or a signal ended the session
	}
	return err
}

// nopWriteCloser leaves stdout open when the session closes its writer.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// buildVersion is the module version the binary was built from ("dev" for
// a build from a working tree).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
