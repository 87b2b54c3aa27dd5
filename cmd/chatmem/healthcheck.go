package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/chatmem/chatmem/internal/settings"
)

// healthcheckConfig is everything `chatmem healthcheck` can be told.
type healthcheckConfig struct {
	url     string
	timeout time.Duration
}

// command is healthcheck's list of settings.
func (c *healthcheckConfig) command() *settings.Command {
	return &settings.Command{
		Name: "healthcheck", Usage: "healthcheck [--url URL] [--timeout 5s]",
		Example: "chatmem healthcheck --url http://127.0.0.1:8080/healthz", EnvPrefix: "CHATMEM_HEALTHCHECK_",
		About: "Exits 0 if the URL answers 200, else 1 with one line saying why: the container image's\nHEALTHCHECK, since the image has no shell and no curl.",
		Settings: []settings.Setting{
			{Name: "url", Group: "healthcheck", Value: settings.String(&c.url, "http://127.0.0.1:8080/healthz"), Example: "http://127.0.0.1:8080/healthz",
				Help: "URL to GET; healthy if it answers 200"},
			{Name: "timeout", Group: "healthcheck", Value: settings.Duration(&c.timeout, 5*time.Second, true), Example: "2s",
				Help: "give up after this long"},
		},
	}
}

// runHealthcheck asks a server's /healthz whether it is alive: exit 0 on
// 200, else 1 with one line saying why. It is the container image's
// HEALTHCHECK, since the image has no shell and no curl.
func runHealthcheck(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
	var c healthcheckConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("healthcheck takes no arguments; run chatmem healthcheck --help")
	}
	url, timeout := &c.url, &c.timeout
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return usageErr("healthcheck: %v", err)
	}
	// A client of its own: no proxy from the environment (the check is of
	// this address, not of a proxy's idea of it) and no redirects.
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("unhealthy: GET %s answered %s", *url, resp.Status)
	}
	return nil
}
