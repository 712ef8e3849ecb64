package postgres

// SearchSQLForTest returns the search statement and its arguments for q.
func SearchSQLForTest(q HotelSearch) (string, []any) { return searchSQL, searchArgs(q) }
