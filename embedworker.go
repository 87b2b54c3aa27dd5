package chatmem

import (
	"context"
	"errors"
	"strings"
)

// embedBatch is the most texts one Embed call gets.
const embedBatch = 128

// embedText is what a message is embedded as: its content and its tool
// calls' names and arguments, as IndexTerms indexes it.
func embedText(m Message) string {
	if len(m.ToolCalls) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		b.WriteString("\n")
		b.WriteString(c.Function.Name)
		b.WriteString(" ")
		b.WriteString(c.Function.Arguments)
	}
	return b.String()
}

// embed stores the vectors of the job's non-system messages (reading them
// if the job does not carry them), in batches. Before each batch is
// stored, lockRevision checks that the conversation is still the one the
// job was made for (created) and still at the Revision the messages were
// read at: vectors of a conversation deleted, or erased with its user,
// while the embedder ran must not land in one created under the key
// since, and vectors of text a rewind or a redaction removed meanwhile
// must not land at all (the messages from that batch on are read and
// embedded again). The delete check and PutVectors are two calls, so a
// delete and re-create between them can still slip a batch through; a
// vector of a deleted conversation is deleted with it, and one that lands
// under the same seq is replaced when that message is embedded.
func (m *Memory) embed(ctx context.Context, j job) error {
	msgs, rev, from := j.msgs, j.rev, j.from
	for {
		if msgs == nil {
			if from == 0 {
				return nil // a job with no messages (a summary request, a catch-up)
			}
			var err error
			if msgs, rev, err = m.rangeAt(ctx, j.key, from-1, int(j.to-from+1)); err != nil {
				return err
			}
		}
		redo, err := m.embedAt(ctx, j, msgs, rev)
		if !errors.Is(err, errRewritten) {
			return err
		}
		msgs, from = nil, redo // embed them again as they are now
	}
}

// embedAt is embed of msgs, read at the conversation's Revision rev. If a
// rewind or a redaction moved it on, it returns errRewritten and the seq
// of the first message whose vector it did not store.
func (m *Memory) embedAt(ctx context.Context, j job, msgs []Message, rev int64) (redo int64, _ error) {
	vs := m.caps.vectors
	var seqs []int64
	var texts []string
	flush := func() error {
		if len(texts) == 0 {
			return nil
		}
		redo = seqs[0]
		var vecs [][]float32
		err := m.retry(ctx, "embedder "+m.embedder.Name(), func(ctx context.Context) (err error) {
			vecs, err = m.embedder.Embed(ctx, texts)
			return err
		})
		if err == nil {
			var unlock func()
			if _, unlock, err = m.lockRevision(ctx, j.key, j.created, rev); err == nil {
				err = vs.PutVectors(ctx, j.key, m.embedder.Name(), seqs, vecs)
				unlock()
			}
		}
		seqs, texts = seqs[:0], texts[:0]
		return err
	}
	for _, msg := range msgs {
		if msg.Role == RoleSystem || strings.TrimSpace(embedText(msg)) == "" {
			continue
		}
		seqs, texts = append(seqs, msg.Seq), append(texts, embedText(msg))
		if len(texts) == embedBatch {
			if err := flush(); err != nil {
				return redo, err
			}
		}
	}
	err := flush()
	return redo, err
}
