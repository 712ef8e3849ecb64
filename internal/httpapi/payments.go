package httpapi

// PaymentStore is what the payment webhook (API.md, Payments) need from the store.
type PaymentStore interface{}

// paymentRoutes registers the payment webhook (API.md, Payments).
func (s *Server) paymentRoutes() {}
