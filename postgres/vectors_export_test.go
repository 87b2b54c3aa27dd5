package postgres

// NearestVectorsSQL returns NearestVectors' statement over schema, for
// EXPLAIN in tests.
func NearestVectorsSQL(schema string) string { return buildVectorQueries(schema).nearest }
