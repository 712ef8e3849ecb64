package searchindex

import "github.com/berthhq/berth/internal/search"

// cityNames are the names major cities go by in other languages (exonyms):
// one group per city, local name first. A hotel in any of these cities is
// indexed with every name of its group (field city_alias), so "munich"
// finds a hotel in "München" although the two words are three edits apart,
// and a near miss of an exonym ("munic") is still within the typo
// tolerance. Accents are folded by the analyzer, so each name is written
// once as the language writes it.
//
// The table is curated, not generated: a wrong alias puts hotels of one
// city into another's results. A name shared by two places (Frankfurt am
// Main and Frankfurt an der Oder) is only given to the one travellers mean.
// Documents carry their aliases from the time they were indexed: a change
// to the table reaches the indexed hotels with `booking search rebuild`
// (every start builds anyway).
var cityNames = [][]string{
	// Central Europe
	{"München", "Munich", "Múnich", "Monaco di Baviera", "Munique", "Monachium", "Mnichov", "Muenchen"},
	{"Köln", "Cologne", "Colonia", "Keulen", "Kolonia", "Koeln"},
	{"Wien", "Vienna", "Viena", "Vienne", "Wenen", "Wiedeń", "Vídeň", "Bécs"},
	{"Praha", "Prague", "Prag", "Praga"},
	{"Nürnberg", "Nuremberg", "Norimberga", "Núremberg", "Nuernberg"},
	{"Frankfurt am Main", "Frankfurt", "Francfort", "Francoforte", "Fráncfort"},
	{"Hannover", "Hanover"},
	{"Braunschweig", "Brunswick"},
	{"Aachen", "Aix-la-Chapelle", "Aquisgrana", "Aquisgrán"},
	{"Zürich", "Zurich", "Zurigo", "Zúrich", "Zuerich"},
	{"Genève", "Geneva", "Genf", "Ginevra", "Ginebra", "Genebra"},
	{"Basel", "Bâle", "Basilea", "Basle"},
	{"Bern", "Berne", "Berna"},
	{"Warszawa", "Warsaw", "Warschau", "Varsovia", "Varsovie", "Varsavia"},
	{"Kraków", "Cracow", "Krakau", "Cracovia", "Cracovie"},
	{"Wrocław", "Breslau", "Breslavia"},
	{"Gdańsk", "Danzig", "Danzica"},
	{"Budapest", "Budapeszt", "Budapešť"},
	{"Bratislava", "Pressburg", "Pozsony"},
	{"Ljubljana", "Laibach", "Lubiana"},
	{"Zagreb", "Agram", "Zagabria"},
	// Western and Southern Europe
	{"Lisboa", "Lisbon", "Lissabon", "Lisbona", "Lisbonne"},
	{"Porto", "Oporto"},
	{"Sevilla", "Seville", "Séville", "Siviglia", "Sevilha"},
	{"Zaragoza", "Saragossa", "Saragosse"},
	{"A Coruña", "La Coruña", "Corunna"},
	{"Firenze", "Florence", "Florenz", "Florencia", "Florença"},
	{"Roma", "Rome", "Rom"},
	{"Milano", "Milan", "Mailand", "Milán", "Milão"},
	{"Venezia", "Venice", "Venedig", "Venecia", "Venise", "Veneza"},
	{"Napoli", "Naples", "Neapel", "Nápoles"},
	{"Torino", "Turin", "Turín"},
	{"Genova", "Genoa", "Genua", "Gênes", "Génova"},
	{"Marseille", "Marseilles", "Marsella", "Marsiglia", "Marselha"},
	{"Lyon", "Lyons", "Lione"},
	{"Strasbourg", "Straßburg", "Strasburgo", "Estrasburgo"},
	{"Nice", "Nizza", "Niza"},
	{"Bruxelles", "Brussels", "Brussel", "Brüssel", "Bruselas", "Bruxelas"},
	{"Antwerpen", "Antwerp", "Anvers", "Amberes", "Anversa"},
	{"Brugge", "Bruges", "Brügge", "Brujas"},
	{"Gent", "Ghent", "Gand", "Gante"},
	{"Den Haag", "The Hague", "La Haye", "L'Aia", "La Haya"},
	{"Luxembourg", "Luxemburg", "Lussemburgo", "Luxemburgo"},
	{"London", "Londres", "Londra", "Londen", "Londyn"},
	{"Edinburgh", "Édimbourg", "Edimburgo"},
	// Northern and Eastern Europe
	{"København", "Copenhagen", "Kopenhagen", "Copenhague", "Copenaghen"},
	{"Göteborg", "Gothenburg", "Goteburgo"},
	{"Helsinki", "Helsingfors"},
	{"Vilnius", "Wilno", "Vilna"},
	{"Athína", "Athens", "Athen", "Atene", "Atenas", "Athènes"},
	{"Beograd", "Belgrade", "Belgrad", "Belgrado"},
	{"București", "Bucharest", "Bukarest", "Bucarest", "Bucareste"},
	{"Moskva", "Moscow", "Moskau", "Mosca", "Moscú", "Moscou"},
	{"Sankt-Peterburg", "Saint Petersburg", "St. Petersburg", "Sankt Petersburg", "San Pietroburgo", "San Petersburgo"},
	{"Kyiv", "Kiev", "Kijów", "Kiew"},
	{"İstanbul", "Istanbul", "Estambul", "Istambul"},
	// Elsewhere
	{"Tōkyō", "Tokyo", "Tokio"},
	{"Beijing", "Peking", "Pékin", "Pechino", "Pequim"},
	{"Mumbai", "Bombay"},
	{"Chennai", "Madras"},
	{"Kolkata", "Calcutta"},
	{"Bengaluru", "Bangalore"},
	{"Ho Chi Minh City", "Saigon", "Sài Gòn"},
	{"Cairo", "Kairo", "Le Caire", "El Cairo", "Il Cairo"},
	{"Ciudad de México", "Mexico City", "Mexiko-Stadt", "Città del Messico"},
	{"New York", "New York City", "Nueva York", "Nova Iorque", "NYC"},
	{"São Paulo", "Sao Paulo", "San Paolo"},
}

// cityAliases maps a folded city name (search.FoldCity) to its group. A
// name in two groups would be ambiguous: TestCityNamesAreUnambiguous keeps
// the table free of them.
var cityAliases = func() map[string][]string {
	m := make(map[string][]string)
	for _, g := range cityNames {
		for _, name := range g {
			m[search.FoldCity(name)] = g
		}
	}
	return m
}()

// aliasesOf returns every name of city's group (nil for a city the table
// does not know), so the city is found by any of them.
func aliasesOf(city string) []string {
	return cityAliases[search.FoldCity(city)]
}
