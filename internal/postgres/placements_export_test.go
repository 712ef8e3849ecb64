package postgres

import "context"

// PartitionTablesForTest returns the tables of the database that carry
// home_region and the set of tables listed in partitionTables.
func PartitionTablesForTest(ctx context.Context, p *Placements) ([]string, map[string]bool) {
	homed, err := p.homedTables(ctx)
	if err != nil {
		panic(err)
	}
	listed := map[string]bool{}
	for _, ts := range partitionTables {
		for _, t := range ts {
			listed[t.name] = true
		}
	}
	for _, t := range sharedPartitionTables {
		listed[t.name] = true
	}
	return homed, listed
}
