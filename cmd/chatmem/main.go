// Command chatmem is the command-line client of the chatmem library: it
// replays the seed (demo), applies a policy to a JSON transcript (window) and
// measures stores (bench).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem/internal/settings"
)

// command is one subcommand. run gets the arguments after the command's
// name; it returns a *exitError for a specific exit code. settings returns
// the command's list of settings (bound to a throwaway config), from which
// docs/configuration.md is generated.
//
// A new command declares a config struct whose command method returns its
// *settings.Command (purge.go is a short example: storeSettings for a
// command on the deployment's store, then its own typed settings), lists
// new(xxxConfig).command here, and in run parses with parseSettings; then
// go test ./cmd/chatmem -run TestConfigurationDoc -update documents it.
type command struct {
	name, summary string
	settings      func() *settings.Command
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "replay the seed's conversation and print its three lines", new(demoConfig).command, runDemo},
		{"window", "apply a policy to a JSON array of chat messages", new(windowConfig).command, runWindow},
		{"bench", "measure per-turn cost (append + context) on a store", new(benchConfig).command, runBench},
		{"serve", "serve the REST API (and MCP at /mcp)", new(serveConfig).command, runServe},
		{"mcp", "serve MCP (Model Context Protocol) tools on stdio, for agents", new(mcpConfig).command, runMCP},
		{"recount", "recount conversations' stored tokens under another tokenizer", new(recountConfig).command, runRecount},
		{"replay", "rebuild the request the chat proxy sent upstream for a reply, from its receipt", new(replayConfig).command, runReplay},
		{"purge", "delete conversations not updated for a while (--older-than)", new(purgeConfig).command, runPurge},
		{"eval", "measure what each policy remembers and costs on a dataset", new(evalConfig).command, runEval},
		{"export", "write a tenant's conversations as chatmem/v1 NDJSON (or OpenAI-style)", new(exportConfig).command, runExport},
		{"import", "read chatmem/v1 NDJSON (or OpenAI-style transcripts) into a store", new(importConfig).command, runImport},
		{"migrate", "copy a tenant's conversations from one store to another, verified", new(migrateConfig).command, runMigrate},
		{"version", "print the version, VCS revision and Go version of this build", new(versionConfig).command, runVersion},
		{"healthcheck", "exit 0 if a server's /healthz answers 200 (the container's health check)", new(healthcheckConfig).command, runHealthcheck},
	}
}

// exitError carries the process exit code for an error: 2 for bad input
// (usage, invalid JSON or messages), 1 for everything else.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err (if any) as one line and returns the exit code.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "chatmem:", err)
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	installRedisLog.Do(func() { goredis.SetLogger(&redisLog) })
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		if len(args) == 0 {
			return usageErr("no command given")
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return helpHint(c.name, c.run(ctx, args[1:], stdin, stdout, stderr))
		}
	}
	printUsage(stderr)
	return usageErr("unknown command %q", args[0])
}

// helpHint ends a usage error (exit 2) that does not say where the help
// is with the command's, so that every one of them does.
func helpHint(name string, err error) error {
	var e *exitError
	if !errors.As(err, &e) || e.code != 2 || strings.Contains(err.Error(), "--help") {
		return err
	}
	return &exitError{code: 2, err: fmt.Errorf("%w; run chatmem %s --help", err, name)}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "chatmem: conversation memory for LLM chatbots\n\nUsage: chatmem <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'chatmem <command> --help' for a command's settings and an example. Every setting is a\n"+
		"flag, a CHATMEM_* environment variable or a key of a JSON config file (docs/configuration.md).")
}
