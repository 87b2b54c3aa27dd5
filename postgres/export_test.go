package postgres

// TailSQL returns the tail statement over schema, for EXPLAIN in tests.
func TailSQL(schema string) string { return buildQueries(schema).tail }

// MigrationCount returns the number of embedded migrations.
func MigrationCount() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// PostingsSQL and MessagesAtSQL return the search statements over schema,
// for EXPLAIN in tests.
func PostingsSQL(schema string) string   { return buildQueries(schema).postings }
func MessagesAtSQL(schema string) string { return buildQueries(schema).messagesAt }

// ConversationSinceSQL returns the ConversationSince statement over
// schema, for EXPLAIN in tests.
func ConversationSinceSQL(schema string) string { return buildQueries(schema).conversationSince }

// StatementNames names the statements of a turn over schema, by their SQL,
// for tests that trace what a store sends.
func StatementNames(schema string) map[string]string {
	q := buildQueries(schema)
	return map[string]string{
		q.appendExisting: "appendExisting", q.system: "system", q.tail: "tail", q.conversation: "conversation",
		q.conversationSince: "conversationSince", q.rangeAfter: "rangeAfter", q.lockConversation: "lockConversation",
	}
}

// SetEraseStep installs f, which DeleteUser then calls between its
// transactions (nil: none).
func SetEraseStep(s *Store, f func()) { s.eraseStep = f }
