package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/chatmem/chatmem"
)

// MigrateOptions qualify a migration.
type MigrateOptions struct {
	// OnConflict is what to do with a conversation the target holds with
	// other content. Zero: ConflictFail, since a migration's target is
	// normally empty or an earlier run of the same migration.
	OnConflict Conflict
	// Progress, if set, is called after each conversation with the
	// counts so far and the totals the source held when the migration
	// started.
	Progress func(p Progress)
}

// Progress is how far a migration has come.
type Progress struct {
	Conversations, TotalConversations int64
	Messages, TotalMessages           int64
}

// MigrateReport is what a migration did and what its verification found.
type MigrateReport struct {
	Totals
	// Verified counts the conversations whose digest is the same in both
	// stores; Mismatched lists those whose is not, Missing those the
	// target lacks.
	Verified   int      `json:"verified"`
	Mismatched []string `json:"mismatched,omitempty"`
	Missing    []string `json:"missing,omitempty"`
}

// Migrate copies the tenant's conversations from one store to another,
// one conversation at a time through the chatmem/v1 format (so in memory
// that follows one page of messages and not the data's size), then
// verifies every conversation by comparing its digests in both stores.
//
// It is resumable: a migration that was killed is finished by running it
// again, which leaves what was copied whole as it is (StatusUnchanged),
// completes a conversation left part-written (StatusResumed) and copies
// the rest. A conversation that changes in the source while it is copied
// shows up in the verification as mismatched; run Migrate again once the
// source is quiet.
func Migrate(ctx context.Context, from, to chatmem.Store, tenant string, opts MigrateOptions) (MigrateReport, error) {
	var rep MigrateReport
	if opts.OnConflict == "" {
		opts.OnConflict = ConflictFail
	}
	var p Progress
	if opts.Progress != nil {
		if err := eachConversation(ctx, from, tenant, func(c chatmem.Conversation) error {
			p.TotalConversations++
			p.TotalMessages += c.LastSeq
			return nil
		}); err != nil {
			return rep, err
		}
	}
	err := eachConversation(ctx, from, tenant, func(c chatmem.Conversation) error {
		res, err := copyConversation(ctx, from, to, c.Key, opts.OnConflict)
		if errors.Is(err, chatmem.ErrNotFound) && res.Conversation == "" {
			return nil // deleted from the source since it was listed
		}
		if err != nil {
			return err
		}
		rep.add(res)
		if res.Status == StatusConflict && opts.OnConflict == ConflictFail {
			return fmt.Errorf("%w: conversation %s: %s", chatmem.ErrConflict, res.Conversation, res.Error)
		}
		if res.Status == StatusInvalid {
			return fmt.Errorf("conversation %s could not be copied: %s", res.Conversation, res.Error)
		}
		p.Conversations++
		p.Messages += c.LastSeq
		if opts.Progress != nil {
			opts.Progress(p)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	err = eachConversation(ctx, from, tenant, func(c chatmem.Conversation) error {
		want, err := Digest(ctx, from, c.Key)
		if errors.Is(err, chatmem.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		got, err := Digest(ctx, to, c.Key)
		switch {
		case errors.Is(err, chatmem.ErrNotFound):
			rep.Missing = append(rep.Missing, c.Key.ID)
		case err != nil:
			return err
		case got != want:
			rep.Mismatched = append(rep.Mismatched, c.Key.ID)
		default:
			rep.Verified++
		}
		return nil
	})
	return rep, err
}

// copyConversation streams one conversation from one store into the other
// through a pipe: an export on one side, an import on the other.
func copyConversation(ctx context.Context, from, to chatmem.Store, key chatmem.Key, onConflict Conflict) (Result, error) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		bw := bufio.NewWriterSize(pw, 1<<16)
		err := WriteHeader(bw)
		if err == nil {
			_, err = WriteConversation(ctx, from, key, bw)
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	var res Result
	_, err := Import(ctx, to, key.Tenant, pr, ImportOptions{OnConflict: onConflictOrSkip(onConflict)}, func(r Result) error {
		res = r
		return nil
	})
	pr.CloseWithError(io.ErrClosedPipe) // ends the export if the import stopped early
	<-done
	return res, err
}

// onConflictOrSkip maps fail to skip for the one-conversation import, so
// that Migrate reports the conflict itself, with its result.
func onConflictOrSkip(c Conflict) Conflict {
	if c == ConflictFail {
		return ConflictSkip
	}
	return c
}
