package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v4"

	"github.com/chatmem/chatmem"
)

// usageConfig is the cost ledger's part of serve's settings.
type usageConfig struct {
	pricesFile, tenantLimitsFile string
	memoryLimit, proxyLimit      string
	usageFlush                   time.Duration
}

// ledger returns the cost ledger over store (in the process only if store
// keeps no usage), with the configured prices and limits.
func (c serveConfig) ledger(store chatmem.Store, log *slog.Logger) (*chatmem.Ledger, error) {
	prices, err := readPrices(c.pricesFile)
	if err != nil {
		return nil, err
	}
	limits, err := c.usageLimits()
	if err != nil {
		return nil, err
	}
	us := chatmem.UsageStoreOf(store)
	if us == nil {
		log.Warn("the store keeps no usage: the cost ledger counts in this process only")
	}
	return chatmem.NewLedger(chatmem.LedgerOptions{Store: us, Prices: prices, Limits: limits, FlushInterval: c.usageFlush, Logger: log}), nil
}

// readPrices reads the prices file, JSON or (by its .yaml or .yml
// extension) YAML; no file means no prices.
func readPrices(path string) (chatmem.Prices, error) {
	if path == "" {
		return nil, nil
	}
	bad := func(err error) error { return &exitError{code: 2, err: fmt.Errorf("prices %s: %w", path, err)} }
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, bad(err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		var v map[string]map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, bad(fmt.Errorf("%w: %v", chatmem.ErrInvalid, err))
		}
		if b, err = json.Marshal(v); err != nil {
			return nil, bad(fmt.Errorf("%w: %v", chatmem.ErrInvalid, err))
		}
	}
	p, err := chatmem.ParsePrices(b)
	if err != nil {
		return nil, bad(err)
	}
	return p, nil
}

// tenantLimit is one tenant's entry of the tenant-limits file.
type tenantLimit struct {
	Memory *string `json:"memory"`
	Proxy  *string `json:"proxy"`
}

// usageLimits returns each tenant's limits: its entry in the
// tenant-limits file, where it has one, else --memory-limit and
// --proxy-limit. Nil when no tenant has any.
func (c serveConfig) usageLimits() (func(string) chatmem.TenantLimits, error) {
	bad := func(what string, err error) error { return &exitError{code: 2, err: fmt.Errorf("%s: %w", what, err)} }
	var def chatmem.TenantLimits
	var err error
	if def.Memory, err = chatmem.ParseLimit(c.memoryLimit); err != nil {
		return nil, bad("memory-limit", err)
	}
	if def.Proxy, err = chatmem.ParseLimit(c.proxyLimit); err != nil {
		return nil, bad("proxy-limit", err)
	}
	per := map[string]chatmem.TenantLimits{}
	if c.tenantLimitsFile != "" {
		b, err := os.ReadFile(c.tenantLimitsFile)
		if err != nil {
			return nil, bad("tenant-limits", err)
		}
		var entries map[string]tenantLimit
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&entries); err != nil {
			return nil, bad("tenant-limits "+c.tenantLimitsFile, fmt.Errorf("%w: %v (want {\"TENANT\": {\"memory\": LIMIT, \"proxy\": LIMIT}})", chatmem.ErrInvalid, err))
		}
		for tenant, e := range entries {
			if err := chatmem.ValidateID(tenant); err != nil {
				return nil, bad("tenant-limits "+c.tenantLimitsFile, err)
			}
			l := def
			if e.Memory != nil {
				if l.Memory, err = chatmem.ParseLimit(*e.Memory); err != nil {
					return nil, bad("tenant-limits "+c.tenantLimitsFile+": tenant "+tenant, err)
				}
			}
			if e.Proxy != nil {
				if l.Proxy, err = chatmem.ParseLimit(*e.Proxy); err != nil {
					return nil, bad("tenant-limits "+c.tenantLimitsFile+": tenant "+tenant, err)
				}
			}
			per[tenant] = l
		}
	}
	if def.Memory.IsZero() && def.Proxy.IsZero() && len(per) == 0 {
		return nil, nil
	}
	return func(tenant string) chatmem.TenantLimits {
		if l, ok := per[tenant]; ok {
			return l
		}
		return def
	}, nil
}
