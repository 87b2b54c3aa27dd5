package transfer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

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
// Each user's record goes with the user's first conversation; from a
// source that lists its users (chatmem.UserLister), the users with facts
// and no conversation left follow, and every user's record is verified.
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
	record := func(results []Result) error {
		for _, res := range results {
			rep.add(res)
			what := "conversation " + res.Conversation
			if res.User != "" {
				what = "user " + res.User
			}
			if res.Status == StatusConflict && opts.OnConflict == ConflictFail {
				return fmt.Errorf("%w: %s: %s", chatmem.ErrConflict, what, res.Error)
			}
			if res.Status == StatusInvalid {
				return fmt.Errorf("%s could not be copied: %s", what, res.Error)
			}
		}
		return nil
	}
	err := eachConversation(ctx, from, tenant, func(c chatmem.Conversation) error {
		results, err := copyConversation(ctx, from, to, c, opts.OnConflict)
		if errors.Is(err, chatmem.ErrNotFound) && !slices.ContainsFunc(results, func(r Result) bool { return r.User == "" }) {
			return nil // deleted from the source since it was listed
		}
		if err != nil {
			return err
		}
		if err := record(results); err != nil {
			return err
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
	// The users with facts and no conversation left, whom the
	// conversations did not bring.
	im := &importer{st: to, tenant: tenant, opts: ImportOptions{OnConflict: onConflictOrSkip(opts.OnConflict)}, started: time.Now()}
	err = eachUser(ctx, from, tenant, func(user chatmem.Key) error {
		var line bytes.Buffer
		if err := writeLoneUser(ctx, from, user, &line); err != nil || line.Len() == 0 {
			return err
		}
		res, err := im.user(ctx, 0, bytes.TrimSuffix(line.Bytes(), []byte{'\n'}))
		if err != nil {
			return err
		}
		return record([]Result{res})
	})
	if err != nil {
		return rep, err
	}
	// A source that lists its users has each verified, those with no
	// conversation included; otherwise each with its first conversation.
	_, listed := from.(chatmem.UserLister)
	if listed {
		err := eachUser(ctx, from, tenant, func(user chatmem.Key) error {
			var want bytes.Buffer
			if err := writeUser(ctx, from, user, &want); err != nil || want.Len() == 0 {
				return err
			}
			return compareUser(ctx, to, user, want.Bytes(), &rep)
		})
		if err != nil {
			return rep, err
		}
	}
	err = eachConversation(ctx, from, tenant, func(c chatmem.Conversation) error {
		want, err := Digest(ctx, from, c.Key)
		if errors.Is(err, chatmem.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !listed {
			if err := verifyUser(ctx, from, to, c, &rep); err != nil {
				return err
			}
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

// verifyUser compares the record of conv's user in both stores, once per
// user (at the user's first conversation, where an export writes it): a
// user whose facts differ is mismatched ("user ID"), one the target lacks
// missing.
func verifyUser(ctx context.Context, from, to chatmem.Store, conv chatmem.Conversation, rep *MigrateReport) error {
	var want bytes.Buffer
	if err := writeUserBefore(ctx, from, conv, &want); err != nil || want.Len() == 0 {
		return err
	}
	return compareUser(ctx, to, chatmem.Key{Tenant: conv.Key.Tenant, ID: conv.User}, want.Bytes(), rep)
}

// compareUser compares the user's record in the target with want, the
// source's record line: a user whose facts differ is mismatched ("user
// ID"), one the target lacks missing.
func compareUser(ctx context.Context, to chatmem.Store, user chatmem.Key, want []byte, rep *MigrateReport) error {
	got, ok, err := readUser(ctx, to, user)
	if err != nil {
		return err
	}
	var line bytes.Buffer
	if err := writeJSONLine(&line, got); err != nil {
		return err
	}
	switch {
	case !ok:
		rep.Missing = append(rep.Missing, "user "+user.ID)
	case !bytes.Equal(line.Bytes(), want):
		rep.Mismatched = append(rep.Mismatched, "user "+user.ID)
	}
	return nil
}

// copyConversation streams one conversation, with its user's record if
// it is the user's first, from one store into the other through a pipe:
// an export on one side, an import on the other. It returns the import's
// results.
func copyConversation(ctx context.Context, from, to chatmem.Store, conv chatmem.Conversation, onConflict Conflict) ([]Result, error) {
	key := conv.Key
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		bw := bufio.NewWriterSize(pw, 1<<16)
		err := WriteHeader(bw)
		if err == nil {
			err = writeUserBefore(ctx, from, conv, bw)
		}
		if err == nil {
			_, err = WriteConversation(ctx, from, key, bw)
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	var results []Result
	// What a store holds is copied as it is: within the limits of the
	// server that appended it, which the migration does not know.
	opts := ImportOptions{OnConflict: onConflictOrSkip(onConflict), Limits: chatmem.NoLimits, MaxLineBytes: -1}
	_, err := Import(ctx, to, key.Tenant, pr, opts, func(r Result) error {
		results = append(results, r)
		return nil
	})
	pr.CloseWithError(io.ErrClosedPipe) // ends the export if the import stopped early
	<-done
	return results, err
}

// onConflictOrSkip maps fail to skip for the one-conversation import, so
// that Migrate reports the conflict itself, with its result.
func onConflictOrSkip(c Conflict) Conflict {
	if c == ConflictFail {
		return ConflictSkip
	}
	return c
}
