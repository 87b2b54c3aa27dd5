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
