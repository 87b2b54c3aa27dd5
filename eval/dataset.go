// Package eval replays conversation datasets into a chatmem.Memory and
// measures, for each policy and budget, what the assembled context keeps of
// the turns that answer each question (evidence recall), how much of the
// gold answer's wording it holds (answer presence), and what it costs
// (tokens sent, time to assemble). No model answers the questions: the
// metrics need none.
//
// Datasets are loaded from a path given at run time (LoCoMo's license
// forbids copying it into this repository); LoadLoCoMo reads LoCoMo's JSON
// and LoadJSONL a generic format for a team's own transcripts.
package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem"
)

// TurnKey is the message metadata key that carries a message's evidence ID
// (LoCoMo's dia_id, "D1:3"; the 1-based position for JSONL), so provenance
// survives into every window assembled from the store.
const TurnKey = "dia_id"

// Dataset is a set of conversations with questions about them.
type Dataset struct {
	Name          string
	Conversations []Conversation
}

// Conversation is one conversation to replay, message by message, and the
// questions asked after its last message.
type Conversation struct {
	ID        string
	Messages  []chatmem.Message // each with Metadata[TurnKey] set
	Questions []Question
}

// Question is one question with its gold answer and evidence.
type Question struct {
	Question string
	// Answer is the gold answer; empty when the dataset has none (LoCoMo's
	// adversarial questions carry only a wrong "adversarial_answer").
	Answer string
	// Category is LoCoMo's category (1 multi-hop, 2 temporal, 3 open-domain,
	// 4 single-hop, 5 adversarial); 0 when the dataset has none.
	Category int
	// Evidence are the valid evidence IDs: well formed, naming a message of
	// the conversation, each once.
	Evidence []string
	// NoEvidence is set when the dataset lists no evidence at all.
	NoEvidence bool
	// Malformed counts evidence IDs that are not IDs ("D", "D8:6; D9:17");
	// Unresolved counts well-formed ones that name no message. Both are
	// skipped.
	Malformed, Unresolved int
}

// Messages counts the dataset's messages.
func (d *Dataset) Messages() int {
	n := 0
	for _, c := range d.Conversations {
		n += len(c.Messages)
	}
	return n
}

// Questions counts the dataset's questions.
func (d *Dataset) Questions() int {
	n := 0
	for _, c := range d.Conversations {
		n += len(c.Questions)
	}
	return n
}

// locomoSample is one element of LoCoMo's top-level array.
type locomoSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []struct {
		Question          string          `json:"question"`
		Answer            json.RawMessage `json:"answer"`
		AdversarialAnswer json.RawMessage `json:"adversarial_answer"`
		Evidence          []string        `json:"evidence"`
		Category          int             `json:"category"`
	} `json:"qa"`
}

type locomoTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
}

var (
	sessionKey = regexp.MustCompile(`^session_(\d+)$`)
	diaID      = regexp.MustCompile(`^D\d+:\d+$`)
)

// LoadLoCoMo reads LoCoMo's JSON (locomo10.json): an array of samples, each
// a conversation between speaker_a and speaker_b in numbered sessions, with
// questions whose evidence names turns by dia_id.
//
// speaker_a's turns become user messages and speaker_b's assistant
// messages, each named after its speaker and carrying its dia_id under
// TurnKey. The first turn of each session starts with "[<session date>] ",
// so the dates are in the transcript as a live conversation would have them
// (a system message would be pinned into every window instead). A shared
// photo's caption follows the text as " [shares a photo: <caption>]".
func LoadLoCoMo(r io.Reader) (*Dataset, error) {
	var samples []locomoSample
	if err := json.NewDecoder(r).Decode(&samples); err != nil {
		return nil, fmt.Errorf("locomo: %w", err)
	}
	d := &Dataset{Name: "locomo"}
	for i, s := range samples {
		c, err := locomoConversation(s)
		if err != nil {
			return nil, fmt.Errorf("locomo sample %d (%s): %w", i, s.SampleID, err)
		}
		d.Conversations = append(d.Conversations, c)
	}
	return d, nil
}

func locomoConversation(s locomoSample) (Conversation, error) {
	var speakerA, speakerB string
	if err := json.Unmarshal(s.Conversation["speaker_a"], &speakerA); err != nil {
		return Conversation{}, fmt.Errorf("speaker_a: %w", err)
	}
	if err := json.Unmarshal(s.Conversation["speaker_b"], &speakerB); err != nil {
		return Conversation{}, fmt.Errorf("speaker_b: %w", err)
	}
	var sessions []int
	for k := range s.Conversation {
		if m := sessionKey.FindStringSubmatch(k); m != nil {
			n, _ := strconv.Atoi(m[1])
			sessions = append(sessions, n)
		}
	}
	slices.Sort(sessions)
	c := Conversation{ID: s.SampleID}
	if c.ID == "" {
		return Conversation{}, fmt.Errorf("no sample_id")
	}
	turns := make(map[string]bool)
	for _, n := range sessions {
		var ts []locomoTurn
		if err := json.Unmarshal(s.Conversation[fmt.Sprintf("session_%d", n)], &ts); err != nil {
			return Conversation{}, fmt.Errorf("session %d: %w", n, err)
		}
		var date string
		if raw, ok := s.Conversation[fmt.Sprintf("session_%d_date_time", n)]; ok {
			_ = json.Unmarshal(raw, &date) // a session without a date has no prefix
		}
		first := true
		for _, t := range ts {
			content := strings.TrimSpace(t.Text)
			if t.BlipCaption != "" {
				content = strings.TrimSpace(content + " [shares a photo: " + t.BlipCaption + "]")
			}
			if content == "" {
				continue
			}
			if first && date != "" {
				content = "[" + date + "] " + content
			}
			first = false
			role := chatmem.RoleAssistant
			if t.Speaker == speakerA {
				role = chatmem.RoleUser
			}
			c.Messages = append(c.Messages, chatmem.Message{
				Role: role, Content: content, Name: t.Speaker,
				Metadata: map[string]string{TurnKey: t.DiaID},
			})
			turns[t.DiaID] = true
		}
	}
	for _, qa := range s.QA {
		answer := qa.Answer
		if len(answer) == 0 || string(answer) == "null" {
			answer = nil
		}
		q := Question{Question: qa.Question, Answer: rawText(answer), Category: qa.Category}
		q.Evidence, q.Malformed, q.Unresolved = resolve(qa.Evidence, func(id string) bool { return diaID.MatchString(id) }, turns)
		q.NoEvidence = len(qa.Evidence) == 0
		c.Questions = append(c.Questions, q)
	}
	return c, nil
}

// resolve splits ids into the valid ones (deduplicated, in order) and
// counts the malformed and the unresolved.
func resolve(ids []string, wellFormed func(string) bool, known map[string]bool) (valid []string, malformed, unresolved int) {
	for _, id := range ids {
		switch {
		case !wellFormed(id):
			malformed++
		case !known[id]:
			unresolved++
		case !slices.Contains(valid, id):
			valid = append(valid, id)
		}
	}
	return valid, malformed, unresolved
}

// rawText returns a JSON string's value, or the JSON text of a number
// (LoCoMo has answers like 2022).
func rawText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// jsonlConversation is one line of the generic format.
type jsonlConversation struct {
	ID       string            `json:"id"`
	Messages []chatmem.Message `json:"messages"`
	Probes   []struct {
		Question string            `json:"question"`
		Answer   json.RawMessage   `json:"answer"`
		Evidence []json.RawMessage `json:"evidence"`
		Category int               `json:"category"`
	} `json:"probes"`
}

// LoadJSONL reads the generic format: one conversation per line,
//
//	{"id":"...","messages":[OpenAI-style messages],
//	 "probes":[{"question":"...","answer":"...","evidence":[1-based positions]}]}
//
// Probes are asked after the last message. Evidence positions name
// messages; a position that is not an integer is malformed, one outside
// the conversation unresolved. A probe may carry a "category"; category 5
// is reported apart, as LoCoMo's adversarial questions are. Blank lines are
// skipped.
func LoadJSONL(r io.Reader) (*Dataset, error) {
	d := &Dataset{Name: "jsonl"}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var jc jsonlConversation
		if err := json.Unmarshal([]byte(text), &jc); err != nil {
			return nil, fmt.Errorf("jsonl line %d: %w", line, err)
		}
		if jc.ID == "" {
			jc.ID = fmt.Sprintf("line-%d", line)
		}
		if len(jc.Messages) == 0 {
			return nil, fmt.Errorf("jsonl line %d (%s): no messages", line, jc.ID)
		}
		c := Conversation{ID: jc.ID, Messages: jc.Messages}
		known := make(map[string]bool, len(jc.Messages))
		for i := range c.Messages {
			id := strconv.Itoa(i + 1)
			if c.Messages[i].Metadata == nil {
				c.Messages[i].Metadata = make(map[string]string, 1)
			}
			c.Messages[i].Metadata[TurnKey] = id
			known[id] = true
		}
		for _, p := range jc.Probes {
			q := Question{Question: p.Question, Answer: rawText(p.Answer), Category: p.Category, NoEvidence: len(p.Evidence) == 0}
			if len(p.Answer) == 0 || string(p.Answer) == "null" {
				q.Answer = ""
			}
			ids := make([]string, len(p.Evidence))
			for i, e := range p.Evidence {
				var n int
				if err := json.Unmarshal(e, &n); err == nil {
					ids[i] = strconv.Itoa(n)
				} else {
					ids[i] = "" // not an integer: malformed
				}
			}
			q.Evidence, q.Malformed, q.Unresolved = resolve(ids, func(id string) bool { return id != "" }, known)
			c.Questions = append(c.Questions, q)
		}
		d.Conversations = append(d.Conversations, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("jsonl line %d: %w", line+1, err)
	}
	return d, nil
}
