package chatmem

import "context"

// The calls a server makes besides turns: listing, paging through a
// conversation's messages, checking the store, and bulk export and import.
// They go through Memory rather than its Store so that whatever writes
// behind Memory's back also drops what Memory keeps between turns.

// List returns the tenant's conversations ordered by ID, one page at a
// time; see Store.List. An invalid tenant or a Limit outside 0..1000
// wraps ErrInvalid.
func (m *Memory) List(ctx context.Context, tenant string, page PageRequest) (Page, error) {
	return m.store.List(ctx, tenant, page)
}

// Messages returns up to limit of the conversation's messages with Seq
// greater than after, oldest first (limit <= 0: all of them), as stored:
// ErrNotFound if the conversation does not exist. Unlike Context it reads
// the store, not the tail cache, so a page is exactly what is stored.
func (m *Memory) Messages(ctx context.Context, key Key, after int64, limit int) ([]Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return m.store.Range(ctx, key, after, limit)
}

// SystemMessages returns the conversation's system messages, in order,
// as the store keeps them (Store.System): ErrNotFound for a conversation
// that does not exist.
func (m *Memory) SystemMessages(ctx context.Context, key Key) ([]Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return m.store.System(ctx, key)
}

// Ping reports whether the store is reachable (wrapping ErrUnavailable if
// not); see Store.Ping.
func (m *Memory) Ping(ctx context.Context) error { return m.store.Ping(ctx) }

// Export runs read, which reads straight from the store to copy data out
// of it in bulk (package transfer's Export, ExportUser, WriteConversation),
// and returns its error. read must not write: writes go through Memory's
// methods, or through Import.
func (m *Memory) Export(read func(Store) error) error { return read(m.raw) }

// Import runs write, which writes straight to the store to copy data into
// it in bulk (package transfer's Import), and returns its error. write
// must call forget with the key of each conversation it created, replaced
// or changed, once it is written: forget drops what this Memory keeps of
// the conversation between turns (its cached tail, summary and fact
// values), so that no turn reads what a replaced conversation held.
func (m *Memory) Import(write func(st Store, forget func(Key)) error) error {
	return write(m.raw, m.forget)
}
