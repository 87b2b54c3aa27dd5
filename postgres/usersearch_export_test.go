package postgres

// UserPostingsSQL and UserMessagesAtSQL return the user search statements
// over schema, for EXPLAIN in tests.
func UserPostingsSQL(schema string) string   { return buildUserSearchQueries(schema).postings }
func UserMessagesAtSQL(schema string) string { return buildUserSearchQueries(schema).messagesAt }
