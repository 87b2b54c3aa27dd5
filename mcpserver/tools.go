package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
)

// Defaults of the tools' optional inputs.
const (
	// DefaultBudget is get_context's budget when none is given, for the
	// policies that need one.
	DefaultBudget = chatmem.DefaultBudget
	// DefaultTurns is get_context's turns for last_turns when none is
	// given.
	DefaultTurns = chatmem.DefaultTurns
	// DefaultSearchLimit is search_memory's limit when none is given.
	DefaultSearchLimit = chatmem.DefaultSearchLimit
	// DefaultListLimit is list_conversations' limit when none is given.
	DefaultListLimit = 50
	// maxListLimit is the most a List page holds (chatmem.Store.List).
	maxListLimit = 1000
)

// tools holds what the tool handlers share: the Memory and the tenant
// every key is made with.
type tools struct {
	mem         *chatmem.Memory
	tenant      string
	log         *slog.Logger
	maxResource int
}

// key returns the tenant's conversation id, checked.
func (t *tools) key(id string) (chatmem.Key, error) {
	if err := chatmem.ValidateID(id); err != nil {
		return chatmem.Key{}, fmt.Errorf("conversation: %w", err)
	}
	return chatmem.Key{Tenant: t.tenant, ID: id}, nil
}

// userKey returns the tenant's user id, checked.
func (t *tools) userKey(id string) (chatmem.Key, error) {
	if err := chatmem.ValidateUser(id); err != nil {
		return chatmem.Key{}, fmt.Errorf("user: %w", err)
	}
	return chatmem.Key{Tenant: t.tenant, ID: id}, nil
}

// owner is what a fact tool names: a conversation or a user.
type owner struct {
	key    chatmem.Key
	isUser bool
}

// String names the owner for a tool result's text.
func (o owner) String() string {
	if o.isUser {
		return "user " + o.key.ID
	}
	return o.key.ID
}

// factOwner returns the owner a fact tool names: exactly one of its
// conversation and user.
func (t *tools) factOwner(in FactOwner) (owner, error) {
	conv, user := in.Conversation, in.User
	switch {
	case conv != "" && user != "":
		return owner{}, fmt.Errorf("%w: give conversation or user, not both: a fact belongs to one of them "+
			"(a conversation sees its user's facts anyway)", chatmem.ErrInvalid)
	case user != "":
		key, err := t.userKey(user)
		return owner{key: key, isUser: true}, err
	case conv != "":
		key, err := t.key(conv)
		return owner{key: key}, err
	}
	return owner{}, fmt.Errorf("%w: give conversation or user: conversation for a fact of that conversation only, "+
		"user for a fact of the person, seen from each of their conversations", chatmem.ErrInvalid)
}

// named is the owner as a fact tool's result names it.
func (o owner) named() FactOwner {
	if o.isUser {
		return FactOwner{User: o.key.ID}
	}
	return FactOwner{Conversation: o.key.ID}
}

// notFound rewords a missing conversation's error for the model.
func notFound(id string, err error) error {
	if errors.Is(err, chatmem.ErrNotFound) {
		return fmt.Errorf("%w: conversation %q does not exist (list_conversations shows the ones that do)", chatmem.ErrNotFound, id)
	}
	return err
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// register adds the tools and resources to s.
func (t *tools) register(s *mcp.Server) {
	closed := no() // memory is a closed world: nothing outside chatmem is touched
	mcp.AddTool(s, &mcp.Tool{
		Name: "append_messages",
		Description: "Store new messages at the end of a conversation (creating it if the ID is new). Call it with " +
			"each user message and each reply, so the conversation is remembered; the messages are validated " +
			"as a whole and either all stored or, on an error, none. Give user (the person's ID) when you know who " +
			"you are talking to: a new conversation is then bound to that user for good and sees their facts; a " +
			"conversation bound to another user, or to none, refuses it. Returns each message's sequence number and tokens.",
		Annotations: &mcp.ToolAnnotations{Title: "Append messages", DestructiveHint: no(), OpenWorldHint: closed},
	}, t.append)
	mcp.AddTool(s, &mcp.Tool{
		Name: "get_context",
		Description: "Get what to send the model for a conversation: the newest messages that fit a token budget " +
			"(policy token_budget, the default), optionally with a summary of older messages (summary_buffer), " +
			"relevant older messages (recall) and the known facts (facts=true). Call it before each model call " +
			"instead of sending the whole history; it reports the tokens and how many messages were left out.",
		Annotations: &mcp.ToolAnnotations{Title: "Get context window", ReadOnlyHint: true, OpenWorldHint: closed},
	}, t.context)
	mcp.AddTool(s, &mcp.Tool{
		Name: "search_memory",
		Description: "Search a conversation's stored messages for words (an order number, a name, a topic), " +
			"however far back they were said, and return the matching messages with their sequence number, " +
			"time and role, best first. It matches words, not meaning. Give conversation to search that conversation, " +
			"or user to search all of that user's conversations at once (each hit names its conversation).",
		Annotations: &mcp.ToolAnnotations{Title: "Search memory", ReadOnlyHint: true, OpenWorldHint: closed},
	}, t.search)
	mcp.AddTool(s, &mcp.Tool{
		Name: "get_facts",
		Description: "Get the known facts (name, order numbers, preferences...), each with its scope, who set it " +
			"and when: facts set with set_fact and those extracted from the messages. Give conversation for what " +
			"that conversation sees (its own facts and its user's, as get_context with facts=true sends them), or " +
			"user for the person's facts only.",
		Annotations: &mcp.ToolAnnotations{Title: "Get facts", ReadOnlyHint: true, OpenWorldHint: closed},
	}, t.getFacts)
	mcp.AddTool(s, &mcp.Tool{
		Name: "set_fact",
		Description: "Remember one fact as a key and a value. Give user for a detail of the person (name=Kavya, " +
			"language, email, address, preferences): it is seen from each of their conversations. Give conversation " +
			"for a detail of this conversation only (order_id=SE-10423, a ticket); the conversation must exist. " +
			"Exactly one of the two. A new value replaces the current one, which is kept as history.",
		Annotations: &mcp.ToolAnnotations{Title: "Set a fact", DestructiveHint: no(), IdempotentHint: true, OpenWorldHint: closed},
	}, t.setFact)
	mcp.AddTool(s, &mcp.Tool{
		Name: "delete_fact",
		Description: "Forget one fact, with its history: a conversation's own (give conversation) or a user's (give user; " +
			"it is forgotten in all their conversations). Use it when the user asks for a detail to be forgotten or it is wrong.",
		Annotations: &mcp.ToolAnnotations{Title: "Delete a fact", DestructiveHint: yes(), IdempotentHint: true, OpenWorldHint: closed},
	}, t.deleteFact)
	mcp.AddTool(s, &mcp.Tool{
		Name: "list_conversations",
		Description: "List the stored conversations, or with user only that user's, ordered by ID, one page at a time " +
			"(pass next_cursor as cursor to continue), with their user and their message and token counts.",
		Annotations: &mcp.ToolAnnotations{Title: "List conversations", ReadOnlyHint: true, OpenWorldHint: closed},
	}, t.list)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "delete_conversation",
		Description: "Delete a conversation for good: its messages, summary and facts. Only when the user asks for it to be erased.",
		Annotations: &mcp.ToolAnnotations{Title: "Delete a conversation", DestructiveHint: yes(), IdempotentHint: true, OpenWorldHint: closed},
	}, t.delete)
	t.registerResources(s)
}

func (t *tools) append(ctx context.Context, _ *mcp.CallToolRequest, in AppendInput) (*mcp.CallToolResult, AppendOutput, error) {
	started := t.mem.Now() // the call's work began: see AppendOptions.Started
	key, err := t.key(in.Conversation)
	if err != nil {
		return nil, AppendOutput{}, err
	}
	if len(in.Messages) == 0 {
		return nil, AppendOutput{}, fmt.Errorf("%w: messages is empty; give at least one message", chatmem.ErrInvalid)
	}
	msgs := make([]chatmem.Message, len(in.Messages))
	for i, m := range in.Messages {
		msg := chatmem.Message{Role: chatmem.Role(m.Role), Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			if c.Type == "" {
				c.Type = "function"
			}
			msg.ToolCalls = append(msg.ToolCalls, chatmem.ToolCall{ID: c.ID, Type: c.Type, Function: chatmem.FunctionCall(c.Function)})
		}
		msgs[i] = msg
	}
	// Memory.Append checks every message, and the batch against the stored
	// history, before it writes; the store writes the batch atomically.
	if in.User != "" {
		if _, err := t.userKey(in.User); err != nil {
			return nil, AppendOutput{}, err
		}
	}
	var p chatmem.Policy
	if in.Context != nil {
		if p, err = policy(*in.Context); err != nil {
			return nil, AppendOutput{}, fmt.Errorf("context: %w", err)
		}
	}
	// The store checks the user in the append's own transaction, so a
	// conflict writes nothing. With a context, Memory.Turn appends and
	// assembles the window in as few round trips as the store allows.
	opts := chatmem.AppendOptions{User: in.User, Started: started}
	var res chatmem.AppendResult
	var w chatmem.Window
	var werr error
	if in.Context != nil {
		res, w, err = t.mem.Turn(ctx, key, msgs, opts, p, chatmem.ContextOptions{})
		if err != nil && res.Conversation.LastSeq > 0 {
			werr, err = err, nil // the append landed; the window failed
		}
	} else {
		res, err = t.mem.Append(ctx, key, msgs, opts)
	}
	if err != nil {
		if in.User != "" && errors.Is(err, chatmem.ErrConflict) && !errors.Is(err, chatmem.ErrErased) {
			err = t.userConflict(ctx, key, in.User, err)
		}
		return nil, AppendOutput{}, t.toolError(ctx, "append_messages", err)
	}
	out := AppendOutput{Conversation: key.ID, User: res.Conversation.User, Messages: make([]Stored, len(res.Messages)), LastSeq: res.Conversation.LastSeq,
		Tokens: res.Conversation.Tokens + res.Conversation.SystemTokens}
	added := 0
	for i, m := range res.Messages {
		out.Messages[i] = Stored{Seq: m.Seq, Role: string(m.Role), Tokens: m.Tokens}
		added += m.Tokens
	}
	of := key.ID
	if out.User != "" {
		of += " (user " + out.User + ")"
	}
	text := fmt.Sprintf("Stored %d message(s) in %s as seq %d-%d (%d tokens); it now holds %d messages, %d tokens.",
		len(out.Messages), of, out.Messages[0].Seq, out.Messages[len(out.Messages)-1].Seq, added, out.LastSeq, out.Tokens)
	switch {
	case werr != nil:
		// The messages are stored: say so, and why there is no window.
		return nil, AppendOutput{}, fmt.Errorf("%s The window could not be assembled: %w", text, t.toolError(ctx, "append_messages", werr))
	case in.Context != nil:
		window, wtext := contextOutput(key, p, w)
		out.Context = &window
		text += "\nContext: " + wtext
	}
	return textResult(text), out, nil
}

// userConflict rewords an append's conflict over its user for the model,
// naming the conversation's user (the tenant's own data).
func (t *tools) userConflict(ctx context.Context, key chatmem.Key, user string, err error) error {
	c, cerr := t.mem.Conversation(ctx, key)
	if cerr != nil {
		return err
	}
	whose := "belongs to no user"
	if c.User != "" {
		whose = fmt.Sprintf("belongs to user %q", c.User)
	}
	return fmt.Errorf("%w: conversation %q %s, not %q: a conversation's user is set when it is created and never "+
		"changes; leave user out to append to it, or start a new conversation for %q", chatmem.ErrConflict, key.ID, whose, user, user)
}

// policy turns get_context's input into a Policy, with the defaults.
func policy(in WindowOptions) (chatmem.Policy, error) {
	p := chatmem.Policy{Kind: chatmem.PolicyKind(in.Policy), Budget: in.Budget, Turns: in.Turns, Facts: in.Facts, Scope: in.Scope, Cache: in.Cache, LowWater: in.LowWater}
	if p.Kind == "" {
		p.Kind = chatmem.PolicyTokenBudget
	}
	if !slices.Contains(chatmem.Policies, p.Kind) {
		names := make([]string, len(chatmem.Policies))
		for i, k := range chatmem.Policies {
			names[i] = string(k)
		}
		return p, fmt.Errorf("%w: unknown policy %q (want one of %s)", chatmem.ErrInvalid, in.Policy, strings.Join(names, ", "))
	}
	if p.Budget < 0 || p.Turns < 0 {
		return p, fmt.Errorf("%w: budget and turns must not be negative", chatmem.ErrInvalid)
	}
	switch p.Kind {
	case chatmem.PolicyTokenBudget, chatmem.PolicySummaryBuffer, chatmem.PolicyRecall:
		if p.Budget == 0 {
			p.Budget = DefaultBudget
		}
	case chatmem.PolicyLastTurns:
		if p.Turns == 0 {
			p.Turns = DefaultTurns
		}
	}
	if p.Turns > 0 && p.Kind != chatmem.PolicyLastTurns {
		return p, fmt.Errorf("%w: turns is an option of last_turns, not of %s", chatmem.ErrInvalid, p.Kind)
	}
	return p, p.Validate()
}

func (t *tools) context(ctx context.Context, _ *mcp.CallToolRequest, in ContextInput) (*mcp.CallToolResult, ContextOutput, error) {
	key, err := t.key(in.Conversation)
	if err != nil {
		return nil, ContextOutput{}, err
	}
	p, err := policy(in.WindowOptions)
	if err != nil {
		return nil, ContextOutput{}, err
	}
	w, err := t.mem.Context(ctx, key, p, chatmem.ContextOptions{Receipt: in.Receipt})
	if err != nil {
		return nil, ContextOutput{}, t.toolError(ctx, "get_context", notFound(key.ID, err))
	}
	out, text := contextOutput(key, p, w)
	out.Receipt = w.Receipt
	return textResult(text), out, nil
}

// contextOutput is w, assembled under p for key, as get_context answers
// it: the structured result and its transcript.
func contextOutput(key chatmem.Key, p chatmem.Policy, w chatmem.Window) (ContextOutput, string) {
	out := ContextOutput{Conversation: key.ID, Policy: string(p.Kind), Messages: make([]Message, len(w.Messages)),
		Tokens: w.Tokens, Dropped: w.Dropped, Facts: factsOf(w.Facts)}
	for i, m := range w.Messages {
		out.Messages[i] = messageOf(m)
	}
	if w.Summary != nil {
		out.Summary = &Summary{Text: w.Summary.Text, CoversSeq: w.Summary.CoversSeq, Tokens: w.Summary.Tokens}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages, %d tokens (%s", len(out.Messages), out.Tokens, p.Kind)
	if p.Budget > 0 {
		fmt.Fprintf(&b, ", budget %d", p.Budget)
	}
	fmt.Fprintf(&b, "); %d older messages not sent.", out.Dropped)
	for _, m := range out.Messages {
		b.WriteByte('\n')
		writeLine(&b, m.Seq, m.Role, m.Kind, m.Content, m.ToolCalls)
	}
	return out, b.String()
}

// writeLine writes one message as a transcript line: "#3 user: text".
func writeLine(b *strings.Builder, seq int64, role, kind, content string, calls []ToolCall) {
	if seq > 0 {
		fmt.Fprintf(b, "#%d ", seq)
	}
	b.WriteString(role)
	if kind != "" {
		fmt.Fprintf(b, " (%s)", kind)
	}
	b.WriteString(": ")
	b.WriteString(content)
	for _, c := range calls {
		fmt.Fprintf(b, " [calls %s(%s) as %s]", c.Function.Name, c.Function.Arguments, c.ID)
	}
}

func (t *tools) search(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
	var key chatmem.Key
	var err error
	switch {
	case in.Conversation != "" && in.User != "":
		err = fmt.Errorf("%w: give conversation or user, not both: user searches all of the user's conversations", chatmem.ErrInvalid)
	case in.User != "":
		key, err = t.userKey(in.User)
	default:
		key, err = t.key(in.Conversation)
	}
	if err != nil {
		return nil, SearchOutput{}, err
	}
	if strings.TrimSpace(in.Query) == "" {
		return nil, SearchOutput{}, fmt.Errorf("%w: query is empty; give the words to look for", chatmem.ErrInvalid)
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	if limit < 1 || limit > chatmem.MaxSearchLimit {
		return nil, SearchOutput{}, fmt.Errorf("%w: limit %d is outside 1..%d", chatmem.ErrInvalid, in.Limit, chatmem.MaxSearchLimit)
	}
	var hits []chatmem.Hit
	if in.User != "" {
		hits, err = t.mem.SearchUser(ctx, key, in.Query, limit)
	} else {
		hits, err = t.mem.Search(ctx, key, in.Query, limit)
	}
	if err != nil {
		return nil, SearchOutput{}, t.toolError(ctx, "search_memory", notFound(key.ID, err))
	}
	out := SearchOutput{Query: in.Query, Hits: make([]Hit, len(hits))}
	var b strings.Builder
	if in.User != "" {
		fmt.Fprintf(&b, "%d message(s) of user %s's conversations match %q.", len(hits), key.ID, in.Query)
	} else {
		fmt.Fprintf(&b, "%d message(s) of %s match %q.", len(hits), key.ID, in.Query)
	}
	for i, h := range hits {
		m := messageOf(h.Message)
		conv := cmp.Or(h.Conversation, key.ID)
		out.Hits[i] = Hit{Conversation: conv, Seq: m.Seq, Time: m.Time, Role: m.Role, Name: m.Name, Text: m.Content, Score: h.Score}
		b.WriteByte('\n')
		if in.User != "" {
			b.WriteString(conv)
			b.WriteByte(' ')
		}
		writeLine(&b, m.Seq, m.Role, "", m.Content, m.ToolCalls)
		if !m.Time.IsZero() {
			fmt.Fprintf(&b, " (%s)", m.Time.UTC().Format("2006-01-02 15:04"))
		}
	}
	return textResult(b.String()), out, nil
}

func (t *tools) getFacts(ctx context.Context, _ *mcp.CallToolRequest, in GetFactsInput) (*mcp.CallToolResult, FactsOutput, error) {
	o, err := t.factOwner(in.FactOwner)
	if err != nil {
		return nil, FactsOutput{}, err
	}
	var fs []chatmem.Fact
	if o.isUser {
		fs, err = t.mem.UserFacts(ctx, o.key)
	} else {
		fs, err = t.mem.VisibleFacts(ctx, o.key)
	}
	if err != nil {
		return nil, FactsOutput{}, t.toolError(ctx, "get_facts", notFound(o.key.ID, err))
	}
	out := FactsOutput{FactOwner: o.named(), Facts: factsOf(fs)}
	var b strings.Builder
	fmt.Fprintf(&b, "%d fact(s) about %s.", len(out.Facts), o)
	for _, f := range out.Facts {
		fmt.Fprintf(&b, "\n%s: %s (set by %s", f.Key, f.Value, f.SetBy)
		if !o.isUser && f.Scope == chatmem.ScopeUser {
			b.WriteString("; the user's")
		}
		b.WriteByte(')')
	}
	return textResult(b.String()), out, nil
}

func (t *tools) setFact(ctx context.Context, _ *mcp.CallToolRequest, in SetFactInput) (*mcp.CallToolResult, SetFactOutput, error) {
	o, err := t.factOwner(in.FactOwner)
	if err != nil {
		return nil, SetFactOutput{}, err
	}
	f := chatmem.Fact{Key: in.Key, Value: in.Value, SetBy: "app", Confidence: 1}
	// Checked here too, so a bad fact is refused before the conversation
	// is looked up, with the fact's own error.
	if err := f.Validate(); err != nil {
		return nil, SetFactOutput{}, err
	}
	set, read := t.mem.SetFacts, t.mem.Facts
	if o.isUser {
		set, read = t.mem.SetUserFacts, t.mem.UserFacts
	}
	if err := set(ctx, o.key, []chatmem.Fact{f}); err != nil {
		return nil, SetFactOutput{}, t.toolError(ctx, "set_fact", notFound(o.key.ID, err))
	}
	// Read back, for the time and provenance the store recorded.
	fs, err := read(ctx, o.key)
	if err != nil {
		return nil, SetFactOutput{}, t.toolError(ctx, "set_fact", notFound(o.key.ID, err))
	}
	out := SetFactOutput{FactOwner: o.named(), Fact: factOf(f)}
	if o.isUser {
		out.Fact.Scope = chatmem.ScopeUser
	}
	for _, got := range fs {
		if got.Key == f.Key {
			out.Fact = factOf(got)
		}
	}
	text := fmt.Sprintf("Set %s = %s for %s.", f.Key, f.Value, o)
	if o.isUser {
		text = fmt.Sprintf("Set %s = %s for %s; each of their conversations sees it.", f.Key, f.Value, o)
	}
	return textResult(text), out, nil
}

func (t *tools) deleteFact(ctx context.Context, _ *mcp.CallToolRequest, in DeleteFactInput) (*mcp.CallToolResult, DeleteFactOutput, error) {
	o, err := t.factOwner(in.FactOwner)
	if err != nil {
		return nil, DeleteFactOutput{}, err
	}
	if err := chatmem.ValidateFactKey(in.Key); err != nil {
		return nil, DeleteFactOutput{}, err
	}
	del := t.mem.DeleteFact
	if o.isUser {
		del = t.mem.DeleteUserFact
	}
	if err := del(ctx, o.key, in.Key); err != nil {
		if errors.Is(err, chatmem.ErrNotFound) {
			what := fmt.Sprintf("conversation %q", o.key.ID)
			if o.isUser {
				what = fmt.Sprintf("user %q", o.key.ID)
			}
			err = fmt.Errorf("%w: %s has no fact %q", chatmem.ErrNotFound, what, in.Key)
		}
		return nil, DeleteFactOutput{}, t.toolError(ctx, "delete_fact", err)
	}
	out := DeleteFactOutput{FactOwner: o.named(), Key: in.Key, Deleted: true}
	return textResult(fmt.Sprintf("Deleted fact %s of %s.", in.Key, o)), out, nil
}

func (t *tools) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	limit := in.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > maxListLimit {
		return nil, ListOutput{}, fmt.Errorf("%w: limit %d is outside 1..%d", chatmem.ErrInvalid, in.Limit, maxListLimit)
	}
	if in.Cursor != "" {
		if err := chatmem.ValidateID(in.Cursor); err != nil {
			return nil, ListOutput{}, fmt.Errorf("cursor (pass next_cursor as it came): %w", err)
		}
	}
	req := chatmem.PageRequest{After: in.Cursor, Limit: limit}
	var page chatmem.Page
	var err error
	if in.User != "" {
		user, uerr := t.userKey(in.User)
		if uerr != nil {
			return nil, ListOutput{}, uerr
		}
		page, err = t.mem.UserConversations(ctx, user, req)
	} else {
		page, err = t.mem.List(ctx, t.tenant, req)
	}
	if err != nil {
		return nil, ListOutput{}, t.toolError(ctx, "list_conversations", err)
	}
	out := ListOutput{Conversations: make([]Conversation, len(page.Conversations)), NextCursor: page.Next}
	var b strings.Builder
	fmt.Fprintf(&b, "%d conversation(s)", len(out.Conversations))
	if in.User != "" {
		fmt.Fprintf(&b, " of user %s", in.User)
	}
	if out.NextCursor != "" {
		fmt.Fprintf(&b, "; more after cursor %s", out.NextCursor)
	}
	b.WriteByte('.')
	for i, c := range page.Conversations {
		out.Conversations[i] = conversationOf(c)
		fmt.Fprintf(&b, "\n%s: %d messages, %d tokens, updated %s", c.Key.ID, c.LastSeq, c.Tokens+c.SystemTokens, c.UpdatedAt.UTC().Format("2006-01-02 15:04"))
		if c.User != "" && in.User == "" {
			fmt.Fprintf(&b, ", user %s", c.User)
		}
	}
	return textResult(b.String()), out, nil
}

func (t *tools) delete(ctx context.Context, _ *mcp.CallToolRequest, in DeleteInput) (*mcp.CallToolResult, DeleteOutput, error) {
	key, err := t.key(in.Conversation)
	if err != nil {
		return nil, DeleteOutput{}, err
	}
	if err := t.mem.Delete(ctx, key); err != nil {
		return nil, DeleteOutput{}, t.toolError(ctx, "delete_conversation", notFound(key.ID, err))
	}
	return textResult(fmt.Sprintf("Deleted conversation %s.", key.ID)), DeleteOutput{Conversation: key.ID, Deleted: true}, nil
}

// toolError turns err into the error a tool result carries. Bad input,
// a missing conversation, a conflict or a budget too small say what was
// wrong, so the model can correct its call; any other failure says only
// its class, and its details go to the log.
func (t *tools) toolError(ctx context.Context, tool string, err error) error {
	switch {
	case errors.Is(err, chatmem.ErrInvalid), errors.Is(err, chatmem.ErrTooLarge),
		errors.Is(err, chatmem.ErrNotFound), errors.Is(err, chatmem.ErrConflict),
		errors.Is(err, chatmem.ErrBudgetTooSmall):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", tool, ctx.Err())
	case errors.Is(err, chatmem.ErrUnavailable):
		t.log.Warn("mcp tool failed", "tool", tool, "tenant", t.tenant, "err", err)
		return errors.New("a backend is unavailable; retry later")
	}
	t.log.Error("mcp tool failed", "tool", tool, "tenant", t.tenant, "err", err)
	return errors.New("internal error; the server's log has the details")
}

// textResult is a result whose text is text; the SDK adds the structured
// content.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
