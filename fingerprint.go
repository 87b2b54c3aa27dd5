package chatmem

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Fingerprint returns the SHA-256, in hex, of msgs as a client sent them:
// their JSON with Seq and Tokens cleared, which the store and the counter
// assign. Equal batches have equal fingerprints (metadata keys are sorted
// by encoding/json), so a retried request matches its first attempt and a
// request that reuses the key with other messages does not. See
// AppendOptions.Fingerprint.
func Fingerprint(msgs []Message) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, m := range msgs {
		m.Seq, m.Tokens = 0, 0
		if err := enc.Encode(m); err != nil {
			// Only a time past year 9999 fails to encode, and Validate
			// refuses those; hash the Go form rather than nothing.
			fmt.Fprintf(h, "%#v\n", m)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CheckFingerprint is the check every store makes when opts.IdempotencyKey
// was already applied to the conversation at key with the fingerprint
// recorded: it returns an error wrapping ErrIdempotencyKeyReused when both
// fingerprints are set and differ, and nil (replay) otherwise.
func CheckFingerprint(key Key, opts AppendOptions, recorded string) error {
	if recorded == "" || opts.Fingerprint == "" || recorded == opts.Fingerprint {
		return nil
	}
	return fmt.Errorf("%w: key %q was applied to conversation %s with other messages", ErrIdempotencyKeyReused, opts.IdempotencyKey, key)
}
