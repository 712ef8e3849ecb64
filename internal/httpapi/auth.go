package httpapi

import (
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/berth"
)

// Principal verifies the request's bearer token. It returns unauthorized
// when the header is missing or the token does not verify.
func (s *Server) Principal(r *http.Request) (berth.Principal, error) {
	return BearerPrincipal(r, s.cfg.Tokens)
}

// Verifier verifies a token.
type Verifier interface {
	Verify(token string) (berth.Principal, error)
}

// BearerPrincipal verifies the Authorization: Bearer token of r.
func BearerPrincipal(r *http.Request, v Verifier) (berth.Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return berth.Principal{}, berth.Errorf(berth.CodeUnauthorized, "send Authorization: Bearer <token>")
	}
	if v == nil {
		return berth.Principal{}, berth.Errorf(berth.CodeUnauthorized, "tokens are not configured")
	}
	p, err := v.Verify(strings.TrimSpace(token))
	if err != nil {
		return berth.Principal{}, &berth.Error{Code: berth.CodeUnauthorized, Detail: "the token is invalid or expired", Err: err}
	}
	return p, nil
}

// requireRole verifies the token and checks its role is one of roles.
func (s *Server) requireRole(r *http.Request, roles ...berth.Role) (berth.Principal, error) {
	p, err := s.Principal(r)
	if err != nil {
		return p, err
	}
	for _, role := range roles {
		if p.Role == role {
			return p, nil
		}
	}
	return p, berth.Errorf(berth.CodeForbidden, "role %s may not do this", p.Role)
}

// forGuest returns an authorize func checking p may act on a guest's
// reservations or appointments in a partition (the one ownership rule of
// every reservation and appointment route).
func forGuest(p berth.Principal, kind berth.Kind, partitionID string) func(guestID string) error {
	return func(guestID string) error {
		if p.MayActForGuest(kind, partitionID, guestID) {
			return nil
		}
		return berth.Errorf(berth.CodeForbidden, "this booking belongs to another guest")
	}
}

// hotelAdminPath reads an admin route under a hotel: the hotel's path id,
// the child's (param, named what in the 404), then an admin token — in that
// order, so bad ids are 404s whatever the token.
func (s *Server) hotelAdminPath(r *http.Request, param, what string) (hotelID, childID string, p berth.Principal, err error) {
	if hotelID, err = PathID(r, "hotel_id", "hotel"); err != nil {
		return
	}
	if childID, err = PathID(r, param, what); err != nil {
		return
	}
	p, err = s.requireRole(r, berth.RoleAdmin)
	return
}

// adminWrite reads the request of an admin's write to one partition: its
// path id (param, named what in the 404), then the admin's token, then the
// JSON body into dst — in that order, so a bad id is a 404 whatever the
// token, and a bad body is looked at only with a valid admin token.
func (s *Server) adminWrite(w http.ResponseWriter, r *http.Request, param, what string, dst any) (string, error) {
	id, err := PathID(r, param, what)
	if err != nil {
		return "", err
	}
	if _, err := s.requireRole(r, berth.RoleAdmin); err != nil {
		return "", err
	}
	if err := Decode(w, r, dst); err != nil {
		return "", err
	}
	return id, nil
}
