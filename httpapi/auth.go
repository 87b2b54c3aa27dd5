package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/chatmem/chatmem"
)

// hashPrefix starts a key given by its SHA-256 digest instead of in plain
// text.
const hashPrefix = "sha256:"

// Key is one API key and the tenant it authenticates. Exactly one of Key
// and Hash is set: Hash lets a configuration hold the digest of a key
// rather than the key itself.
type Key struct {
	// Tenant is the tenant every request with this key acts as; it must
	// pass chatmem.ValidateID.
	Tenant string
	// Key is the key in plain text.
	Key string
	// Hash is "sha256:" followed by the hex SHA-256 digest of the key, as
	// HashKey returns it.
	Hash string
}

// HashKey returns the form of key that Key.Hash and ParseKeys accept:
// "sha256:" and the hex SHA-256 digest of key.
func HashKey(key string) string {
	d := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(d[:])
}

// ParseKeys parses a list of API keys in the form CHATMEM_API_KEYS takes:
// comma-separated TENANT:KEY pairs ("acme:k1,globex:k2"), where a KEY
// starting with "sha256:" is the digest of the key (see HashKey) rather than
// the key. Spaces around pairs are ignored; an empty or blank s is no keys.
// Bad input wraps chatmem.ErrInvalid; the messages never repeat a key.
func ParseKeys(s string) ([]Key, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys []Key
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		tenant, secret, ok := strings.Cut(pair, ":")
		if !ok || tenant == "" || secret == "" {
			return nil, fmt.Errorf("%w: API key %d: want TENANT:KEY", chatmem.ErrInvalid, i+1)
		}
		k := Key{Tenant: tenant, Key: secret}
		if strings.HasPrefix(secret, hashPrefix) {
			k = Key{Tenant: tenant, Hash: secret}
		}
		keys = append(keys, k)
	}
	if _, err := digestKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// keyDigest is a configured key as the server keeps it: the digest only.
type keyDigest struct {
	tenant string
	digest [sha256.Size]byte
}

// digestKeys validates keys and returns their digests. Two entries with the
// same key are refused: the key could not say which tenant it is.
func digestKeys(keys []Key) ([]keyDigest, error) {
	out := make([]keyDigest, 0, len(keys))
	seen := make(map[[sha256.Size]byte]bool, len(keys))
	for i, k := range keys {
		if err := chatmem.ValidateID(k.Tenant); err != nil {
			return nil, fmt.Errorf("API key %d: tenant: %w", i+1, err)
		}
		d := keyDigest{tenant: k.Tenant}
		switch {
		case (k.Key == "") == (k.Hash == ""):
			return nil, fmt.Errorf("%w: API key %d (tenant %s): set exactly one of Key and Hash", chatmem.ErrInvalid, i+1, k.Tenant)
		case k.Key != "":
			if strings.TrimSpace(k.Key) != k.Key || strings.ContainsAny(k.Key, ", \t\r\n") {
				return nil, fmt.Errorf("%w: API key %d (tenant %s) contains spaces or commas", chatmem.ErrInvalid, i+1, k.Tenant)
			}
			d.digest = sha256.Sum256([]byte(k.Key))
		default:
			hexDigest, ok := strings.CutPrefix(k.Hash, hashPrefix)
			b, err := hex.DecodeString(hexDigest)
			if !ok || err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%w: API key %d (tenant %s): hash must be %s followed by 64 hex digits", chatmem.ErrInvalid, i+1, k.Tenant, hashPrefix)
			}
			copy(d.digest[:], b)
		}
		if seen[d.digest] {
			return nil, fmt.Errorf("%w: API key %d (tenant %s) is configured twice", chatmem.ErrInvalid, i+1, k.Tenant)
		}
		seen[d.digest] = true
		out = append(out, d)
	}
	return out, nil
}

// authenticate returns the tenant of the request's bearer key. It compares
// the key's digest with every configured digest in constant time, without
// stopping at a match, so neither which key matched nor how much of it did
// shows in the time taken.
//
// On the chat proxy's routes under UpstreamAuthPassthrough the key comes
// in X-Chatmem-Key instead (bare, or as Bearer KEY): Authorization is the
// client's credential for the upstream.
func (s *Server) authenticate(r *http.Request, route string) (string, error) {
	name, h := "Authorization", r.Header.Get("Authorization")
	if s.up != nil && s.up.passthrough && openAIRoute(route) {
		name, h = headerKey, r.Header.Get(headerKey)
		if h != "" && !strings.Contains(h, " ") {
			h = "Bearer " + h
		}
	}
	scheme, presented, _ := strings.Cut(h, " ")
	presented = strings.TrimSpace(presented)
	if h == "" {
		return "", fmt.Errorf("%w: missing %s: Bearer KEY", ErrUnauthorized, name)
	}
	if !strings.EqualFold(scheme, "Bearer") || presented == "" {
		return "", fmt.Errorf("%w: %s must be Bearer KEY", ErrUnauthorized, name)
	}
	d := sha256.Sum256([]byte(presented))
	found, match := 0, 0
	for i, k := range s.keys {
		eq := subtle.ConstantTimeCompare(d[:], k.digest[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
		match |= eq
	}
	if match == 0 {
		return "", fmt.Errorf("%w: unknown API key", ErrUnauthorized)
	}
	return s.keys[found].tenant, nil
}
