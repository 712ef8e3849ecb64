package postgres

import "github.com/berthhq/berth/internal/search"

// SearchSQLForTest returns the search statement and its arguments for q.
func SearchSQLForTest(q search.Query) (string, []any) { return searchSQL, searchArgs(q) }
