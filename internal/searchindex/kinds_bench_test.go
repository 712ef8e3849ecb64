package searchindex

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/reservation"
)

func BenchmarkSearchKinds(b *testing.B) {
	x := benchIndex(b, 20_000)
	defer x.Close()
	in := today().AddDays(3)
	stay := reservation.Stay{CheckIn: in, CheckOut: in.AddDays(2)}
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"text_city", Query{Text: "munchen", Limit: 20}},
		{"text_typo2", Query{Text: "grnd munchen", Limit: 20}},
		{"city_dates", Query{City: "paris 3", Stay: &stay, Guests: 2, Limit: 20}},
		{"near", Query{Near: &Point{45, 7}, RadiusKm: 5, Sort: SortDistance, Limit: 20}},
		{"price", Query{Text: "munchen", Sort: SortPrice, Stay: &stay, Limit: 20}},
		{"all", Query{Limit: 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := x.Search(context.Background(), tc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
