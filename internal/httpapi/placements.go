package httpapi

// PlacementStore is what the placement and operations routes (API.md, Placement and operations) need from the store.
type PlacementStore interface{}

// placementRoutes registers the placement and operations routes (API.md, Placement and operations).
func (s *Server) placementRoutes() {}
