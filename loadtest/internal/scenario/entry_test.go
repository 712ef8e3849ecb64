package scenario

import "testing"

// A hold enters through its hotel's own region, or with --entry other
// through the next region's router, never its own.
func TestEntryRegion(t *testing.T) {
	t.Parallel()
	regions := []string{"us-east", "eu-west", "ap-south"}
	for _, tc := range []struct {
		regions     []string
		home, entry string
		want        string
	}{
		{regions, "eu-west", "home", "eu-west"},
		{regions, "eu-west", "", "eu-west"},
		{regions, "us-east", "other", "eu-west"},
		{regions, "eu-west", "other", "ap-south"},
		{regions, "ap-south", "other", "us-east"},
		{[]string{"us-east"}, "us-east", "other", "us-east"},
		{regions, "mars", "other", "mars"},
	} {
		if got := entryRegion(tc.regions, tc.home, tc.entry); got != tc.want {
			t.Errorf("entryRegion(%v, %s, %s) = %s, want %s", tc.regions, tc.home, tc.entry, got, tc.want)
		}
	}
}
