package postgres

// TailSQL returns the tail statement over schema, for EXPLAIN in tests.
func TailSQL(schema string) string { return buildQueries(schema).tail }
