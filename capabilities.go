package chatmem

import "fmt"

// capabilities are the optional interfaces of a Memory's store, found once
// in New (capabilitiesOf), so that the rest of the package asks a field,
// not the store, and what Memory does without each one is written here,
// next to it. A nil field means the store does not implement it.
type capabilities struct {
	// summaries keeps the rolling summaries. Without it New refuses a
	// Summarizer, Summary returns ErrNotFound and summary_buffer sends a
	// plain window.
	summaries SummaryStore
	// facts keeps facts. Without it New refuses Extractors, and the fact
	// methods and a read with Policy.Facts wrap ErrInvalid (factStore).
	facts FactStore
	// vectors keeps embeddings. Without it New refuses an Embedder.
	vectors VectorStore
	// users binds conversations to users. Without it the user methods and
	// an append naming a user wrap ErrInvalid (userStore), and a
	// conversation sees its own facts only.
	users UserStore
	// userLister lists a tenant's users. Without it Users wraps ErrInvalid.
	userLister UserLister
	// search is the index PolicyRecall and Search read. Without it they
	// wrap ErrInvalid.
	search Searcher
	// userSearch is the index of a user's conversations. Without it
	// SearchUser wraps ErrInvalid and recall with ScopeUser stays in the
	// conversation.
	userSearch UserSearcher
	// indexCatcher's index may lag appends: the worker catches it up in
	// batches. Without it there is nothing to catch up.
	indexCatcher IndexCatcher
	// leaser grants leases on derived work. Without it every process
	// calls the models itself (what they store is compare-and-set all the
	// same).
	leaser Leaser
	// generations writes derived data conditional on the conversation's
	// CreatedAt. Without it Memory checks the CreatedAt, then writes (a
	// delete and re-create can slip in between).
	generations GenerationWriter
	// factMarks keeps where extraction stands. Without it extraction
	// follows the appends the worker saw, and Start scans for nothing.
	factMarks FactMarker
	// recounter rewrites stored counts. Without it Recount wraps
	// ErrInvalid.
	recounter Recounter
	// since reads the messages after the tail cache's entry with the
	// conversation's metadata. Without it they are a second read.
	since SinceReader
	// tailAppend reads a tail in the append's round trip. Without it a
	// Turn the tail cache cannot serve reads its window after the append.
	tailAppend TailAppender
	// rewinder takes a conversation back to an earlier message. Without
	// it Rewind wraps ErrInvalid.
	rewinder Rewinder
	// revisionRewinder pins a rewind to the conversation's Revision.
	// Without it a Rewind with RewindOptions.ExpectedRevision wraps
	// ErrInvalid.
	revisionRewinder RevisionRewinder
	// redactor replaces the text of a stored message. Without it Redact
	// wraps ErrInvalid.
	redactor Redactor
	// usage keeps the cost ledger's counts. Without it a Ledger keeps them
	// in its process, and DeleteUser has none to anonymize.
	usage UsageStore
	// receipts keeps the receipts stored with replies. Without it an
	// append's receipt is dropped and Receipts wraps ErrInvalid.
	receipts ReceiptStore
}

// capabilitiesOf finds store's optional interfaces.
func capabilitiesOf(store Store) capabilities {
	var c capabilities
	c.summaries, _ = store.(SummaryStore)
	c.facts, _ = store.(FactStore)
	c.vectors, _ = store.(VectorStore)
	c.users, _ = store.(UserStore)
	c.userLister, _ = store.(UserLister)
	c.search, _ = store.(Searcher)
	c.userSearch, _ = store.(UserSearcher)
	c.indexCatcher, _ = store.(IndexCatcher)
	c.leaser, _ = store.(Leaser)
	c.generations, _ = store.(GenerationWriter)
	c.factMarks, _ = store.(FactMarker)
	c.recounter, _ = store.(Recounter)
	c.since, _ = store.(SinceReader)
	c.tailAppend, _ = store.(TailAppender)
	c.rewinder, _ = store.(Rewinder)
	c.revisionRewinder, _ = store.(RevisionRewinder)
	c.redactor, _ = store.(Redactor)
	c.usage, _ = store.(UsageStore)
	c.receipts, _ = store.(ReceiptStore)
	return c
}

// check refuses options that need an interface the store lacks.
func (c capabilities) check(opts Options) error {
	switch {
	case opts.Summarizer != nil && c.summaries == nil:
		return fmt.Errorf("%w: a summarizer needs a store that keeps summaries", ErrInvalid)
	case len(opts.Extractors) > 0 && c.facts == nil:
		return fmt.Errorf("%w: extractors need a store that keeps facts", ErrInvalid)
	case opts.Embedder != nil && c.vectors == nil:
		return fmt.Errorf("%w: an embedder needs a store that keeps vectors", ErrInvalid)
	}
	return nil
}

// factStore returns the store as a FactStore, or ErrInvalid.
func (m *Memory) factStore() (FactStore, error) {
	if m.caps.facts == nil {
		return nil, fmt.Errorf("%w: this store keeps no facts", ErrInvalid)
	}
	return m.caps.facts, nil
}

// userStore returns the store as a UserStore, or ErrInvalid.
func (m *Memory) userStore() (UserStore, error) {
	if m.caps.users == nil {
		return nil, fmt.Errorf("%w: this store keeps no users", ErrInvalid)
	}
	return m.caps.users, nil
}

// UsageStoreOf returns store as a UsageStore, or nil if it keeps no usage:
// what a program gives LedgerOptions.Store.
func UsageStoreOf(store Store) UsageStore {
	return capabilitiesOf(store).usage
}
