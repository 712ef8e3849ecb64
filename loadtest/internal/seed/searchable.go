package seed

import (
	"fmt"
	"slices"
)

// City is a city of the searchable catalog: its local name (the one a
// hotel's address carries) and its centre.
type City struct {
	Name     string
	Country  string
	Lat, Lon float64
	// Exonym is a name the city goes by in English when it differs from
	// the local one ("" when it does not): what a traveller types.
	Exonym string
}

// Cities are the cities of the searchable catalog: hotels are spread over
// them evenly (50,000 hotels are 1,250 per city), within about 10 km of
// the centre.
var Cities = []City{
	{"München", "DE", 48.137, 11.575, "Munich"}, {"Köln", "DE", 50.938, 6.960, "Cologne"},
	{"Wien", "AT", 48.208, 16.373, "Vienna"}, {"Praha", "CZ", 50.075, 14.438, "Prague"},
	{"Lisboa", "PT", 38.722, -9.139, "Lisbon"}, {"Firenze", "IT", 43.770, 11.255, "Florence"},
	{"Roma", "IT", 41.903, 12.496, "Rome"}, {"Milano", "IT", 45.464, 9.190, "Milan"},
	{"Venezia", "IT", 45.441, 12.316, "Venice"}, {"Napoli", "IT", 40.852, 14.268, "Naples"},
	{"Bruxelles", "BE", 50.850, 4.352, "Brussels"}, {"Zürich", "CH", 47.377, 8.541, "Zurich"},
	{"Genève", "CH", 46.204, 6.143, "Geneva"}, {"København", "DK", 55.676, 12.568, "Copenhagen"},
	{"Warszawa", "PL", 52.230, 21.012, "Warsaw"}, {"Kraków", "PL", 50.065, 19.945, "Cracow"},
	{"Athína", "GR", 37.984, 23.728, "Athens"}, {"Sevilla", "ES", 37.389, -5.984, "Seville"},
	{"Nürnberg", "DE", 49.452, 11.077, "Nuremberg"}, {"Frankfurt am Main", "DE", 50.110, 8.682, "Frankfurt"},
	{"Berlin", "DE", 52.520, 13.405, ""}, {"Hamburg", "DE", 53.551, 9.993, ""},
	{"Paris", "FR", 48.857, 2.352, ""}, {"Madrid", "ES", 40.417, -3.704, ""},
	{"Barcelona", "ES", 41.385, 2.173, ""}, {"Amsterdam", "NL", 52.370, 4.895, ""},
	{"Budapest", "HU", 47.498, 19.040, ""}, {"London", "GB", 51.507, -0.128, ""},
	{"Dublin", "IE", 53.350, -6.260, ""}, {"Edinburgh", "GB", 55.953, -3.188, ""},
	{"Porto", "PT", 41.158, -8.629, ""}, {"Stockholm", "SE", 59.329, 18.069, ""},
	{"Oslo", "NO", 59.913, 10.752, ""}, {"Helsinki", "FI", 60.170, 24.938, ""},
	{"New York", "US", 40.713, -74.006, ""}, {"São Paulo", "BR", -23.551, -46.633, ""},
	{"Mumbai", "IN", 19.076, 72.878, ""}, {"Tōkyō", "JP", 35.676, 139.650, "Tokyo"},
	{"Singapore", "SG", 1.352, 103.820, ""}, {"İstanbul", "TR", 41.008, 28.978, "Istanbul"},
}

// NameWords are the words hotel names of the searchable catalog are made
// of: a first word, a second word and a kind.
var NameWords = [3][]string{
	{"Grand", "Royal", "Park", "Central", "Garden", "Golden", "Imperial", "Old Town", "River", "Lake",
		"Alpine", "Harbour", "Sunset", "Panorama", "Linden", "Castle", "Station", "Market", "Cathedral", "Opera"},
	{"Palace", "View", "Plaza", "Court", "House", "Tower", "Square", "Gate", "Bridge", "Corner",
		"Terrace", "Manor", "Lodge", "Mill", "Hall", "Point", "Yard", "Quarter", "Crown", "Star"},
	{"Hotel", "Inn", "Suites", "Residence", "Hostel", "Apartments", "Pension", "Boutique Hotel"},
}

// Amenities of the searchable catalog, each with the share of hotels
// that have it (in percent).
var Amenities = []struct {
	Code  string
	Share int
}{{"wifi", 85}, {"breakfast", 55}, {"parking", 40}, {"pets", 20}, {"gym", 25}, {"pool", 15}, {"spa", 10}}

// Profile is hotel i of the searchable catalog.
type Profile struct {
	Name, City, Country string
	Lat, Lon            float64
	Amenities           []string
}

// SearchHotel returns hotel i of the searchable catalog: the same i always
// gives the same hotel, so a scenario can ask for what a seed wrote.
func SearchHotel(i int) Profile {
	r := mix(uint64(i))
	c := Cities[i%len(Cities)]
	p := Profile{
		Name: fmt.Sprintf("%s %s %s", NameWords[0][r%20], NameWords[1][(r>>8)%20], NameWords[2][(r>>16)%8]),
		City: c.Name, Country: c.Country,
		// Within ±0.09° of latitude (≈ 10 km) and a like distance of longitude.
		Lat: c.Lat + (float64((r>>24)%1801)-900)/10000,
		Lon: c.Lon + (float64((r>>36)%2401)-1200)/10000,
	}
	for k, a := range Amenities {
		if int(mix(uint64(i)*8+uint64(k))%100) < a.Share {
			p.Amenities = append(p.Amenities, a.Code)
		}
	}
	slices.Sort(p.Amenities)
	return p
}

// SearchRoom returns room type j of hotel i: the first for two guests,
// the second for four, further ones for one to four; prices from 60 to
// 300 a night.
func SearchRoom(i, j int) (maxGuests int32, priceCents int64) {
	switch j {
	case 0:
		maxGuests = 2
	case 1:
		maxGuests = 4
	default:
		maxGuests = int32(1 + j%4)
	}
	return maxGuests, 6000 + int64(mix(uint64(i)*16+uint64(j))%241)*100 + int64(j)*2500
}

// mix is splitmix64's finalizer: a well-spread hash of i.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
