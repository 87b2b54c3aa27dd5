package chatmem

import (
	"context"
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
// if the job does not carry them), in batches. Before each batch it checks
// that the conversation is still the one the job was made for (created):
// vectors of a conversation deleted, or erased with its user, while the
// embedder ran must not land in one created under the key since. The check
// and PutVectors are two calls, so a delete and re-create between them can
// still slip a batch through; a vector of a deleted conversation is
// deleted with it, and one that lands under the same seq is replaced when
// that message is embedded.
func (m *Memory) embed(ctx context.Context, j job) error {
	vs := m.caps.vectors
	msgs := j.msgs
	if msgs == nil {
		var err error
		if msgs, err = m.store.Range(ctx, j.key, j.from-1, int(j.to-j.from+1)); err != nil {
			return err
		}
	}
	var seqs []int64
	var texts []string
	flush := func() error {
		if len(texts) == 0 {
			return nil
		}
		var vecs [][]float32
		err := m.retry(ctx, "embedder "+m.embedder.Name(), func(ctx context.Context) (err error) {
			vecs, err = m.embedder.Embed(ctx, texts)
			return err
		})
		if err == nil && !j.created.IsZero() {
			err = m.sameGeneration(ctx, j.key, j.created)
		}
		if err == nil {
			err = vs.PutVectors(ctx, j.key, m.embedder.Name(), seqs, vecs)
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
				return err
			}
		}
	}
	return flush()
}
