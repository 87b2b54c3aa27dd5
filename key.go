package chatmem

import "fmt"

// DefaultTenant is the tenant of conversations when no credentials are
// configured (a single-tenant library or a loopback server).
const DefaultTenant = "default"

// MaxIDLen is the longest conversation ID or tenant name accepted.
const MaxIDLen = 128

// Key names one conversation: a tenant and an ID unique within it. Stores
// make the tenant part of every key and row, so no operation of one tenant
// reaches another's data.
type Key struct {
	Tenant string
	ID     string
}

func (k Key) String() string { return k.Tenant + "/" + k.ID }

// Validate checks both parts with ValidateID. It wraps ErrInvalid.
func (k Key) Validate() error {
	if err := ValidateID(k.Tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if err := ValidateID(k.ID); err != nil {
		return fmt.Errorf("conversation id: %w", err)
	}
	return nil
}

// ValidateID accepts 1 to MaxIDLen characters from [A-Za-z0-9._:@-], starting
// with a letter or digit. The set excludes everything that means something in
// a path (/, ..), a Redis key pattern or hash tag (* ? [ ] { }) or SQL quoting,
// so an ID can be put into any store's key as it is.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id", ErrInvalid)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: id is %d characters, over %d", ErrInvalid, len(id), MaxIDLen)
	}
	if idChars[id[0]] != idAlnum {
		return fmt.Errorf("%w: id %q must start with a letter or digit", ErrInvalid, id)
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; idChars[c] == 0 {
			return fmt.Errorf("%w: id %q has character %q; allowed are letters, digits and . _ : @ -", ErrInvalid, id, c)
		}
	}
	return nil
}

// idChars classes the bytes ValidateID accepts: idAlnum for letters and
// digits, idPunct for . _ : @ -, 0 for the rest (every key is checked on
// every call, so it is a table lookup a byte).
var idChars = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			t[c] = idAlnum
		case c == '.' || c == '_' || c == ':' || c == '@' || c == '-':
			t[c] = idPunct
		}
	}
	return t
}()

const (
	idAlnum = 1
	idPunct = 2
)
