package httpapi

// ClinicStore is what the clinic routes (API.md, Clinics) need from the store.
type ClinicStore interface{}

// clinicRoutes registers the clinic routes (API.md, Clinics).
func (s *Server) clinicRoutes() {}
