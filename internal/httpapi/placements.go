package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/placement"
)

// PlacementStore is what the placement and operations routes (API.md, Placement and operations) need from the store.
type PlacementStore interface {
	ListPlacements(ctx context.Context, kind berth.Kind, region string) ([]placement.Placement, error)
	MovePlacement(ctx context.Context, kind berth.Kind, partitionID, to string) (placement.MoveResult, error)
}

// placementRoutes registers the placement and operations routes (API.md, Placement and operations).
//
// A move is a write but it is never fenced: the placement table is global
// and any region's booking service may move any partition (the move's own
// transaction locks the placement row).
func (s *Server) placementRoutes() {
	s.mux.HandleFunc("GET /v1/placements", s.handle(s.listPlacements))
	s.mux.HandleFunc("POST /v1/placements/{kind}/{partition_id}/move", s.handle(s.movePlacement))
}

func (s *Server) listPlacements(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.requireRole(r, berth.RoleOps); err != nil {
		return err
	}
	q := r.URL.Query()
	kind, region := berth.Kind(q.Get("kind")), q.Get("region")
	var f Fields
	if kind != "" && !kind.Valid() {
		f.Add("kind", "want hotel or clinic")
	}
	if region != "" && !berth.ValidRegion(region) {
		f.Add("region", "want one of "+strings.Join(berth.Regions(), ", "))
	}
	if err := f.Err(); err != nil {
		return err
	}
	list, err := s.cfg.Placements.ListPlacements(r.Context(), kind, region)
	if err != nil {
		return err
	}
	if list == nil {
		list = []placement.Placement{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"placements": list})
	return nil
}

type moveRequest struct {
	ToRegion string `json:"to_region"`
}

func (s *Server) movePlacement(w http.ResponseWriter, r *http.Request) error {
	p, err := s.requireRole(r, berth.RoleOps)
	if err != nil {
		return err
	}
	kind := berth.Kind(r.PathValue("kind"))
	if !kind.Valid() {
		return berth.Errorf(berth.CodeNotFound, "no partition kind %q", kind)
	}
	id, err := PathID(r, "partition_id", string(kind))
	if err != nil {
		return err
	}
	var req moveRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	if !berth.ValidRegion(req.ToRegion) {
		return berth.Invalid(berth.FieldError{Field: "to_region", Message: "want one of " + strings.Join(berth.Regions(), ", ")})
	}
	res, err := s.cfg.Placements.MovePlacement(r.Context(), kind, id, req.ToRegion)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "placement moved", "kind", kind, "partition_id", id, "from", res.FromRegion,
		"to", res.HomeRegion, "version", res.Version, "moved", res.Moved, "rows", res.Rows, "by", p.Subject)
	WriteJSON(w, http.StatusOK, res)
	return nil
}
