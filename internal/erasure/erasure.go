// Package erasure names a user in the erasure records the stores keep
// (chatmem.UserStore.DeleteUser), without the user's ID: a record outlives
// the erasure, and an erased user's ID must not stay in the store.
package erasure

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/chatmem/chatmem"
)

// ID returns the 16 bytes that name user in an erasure record: the first
// half of SHA-256 over its tenant and ID. Two users sharing it would
// share a record, which can only refuse work (chatmem.ErrErased), never
// let any through; at 128 bits it does not happen.
func ID(user chatmem.Key) []byte {
	h := sha256.Sum256([]byte(user.Tenant + "\x00" + user.ID))
	return h[:16]
}

// Hex is ID in lower-case hexadecimal, for stores that name keys with it.
func Hex(user chatmem.Key) string {
	return hex.EncodeToString(ID(user))
}
