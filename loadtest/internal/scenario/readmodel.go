package scenario

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/report"
)

// readModel checks, for a sample of guests, that the read model lists every
// reservation the client created for them with the database's status. It
// is eventually consistent, so it polls for up to 20 s before failing.
func (e *Env) readModel(ctx context.Context, l *audit.Ledger) report.Check {
	c := report.Check{Name: "read model matches the database (sampled guests)"}
	if e.ReadModelURL == "" || e.Client == nil || !client.Healthy(ctx, e.ReadModelURL) {
		c.OK, c.Skipped, c.Detail = true, true, "no read model answering at BERTH_READMODEL_URL"
		return c
	}
	want := map[string]map[string]string{} // guest → id → status (from the DB)
	items := append(l.Items("hotel"), l.Items("clinic")...)
	byID := map[string]audit.Created{}
	for _, it := range items {
		byID[it.ID] = it
	}
	guests := l.Guests()
	sort.Strings(guests)
	if len(guests) > 20 {
		guests = guests[:20]
	}
	if len(guests) == 0 {
		c.OK, c.Skipped, c.Detail = true, true, "no guest created anything"
		return c
	}
	// One statement for the sample: reservations has no index by guest (a
	// guest's list is the read model's; schema/00910), so this reads the
	// table once rather than once per guest.
	for _, g := range guests {
		want[g] = map[string]string{}
	}
	rows, err := e.DB.Query(ctx, `SELECT guest_id, reservation_id::TEXT, status FROM reservations WHERE guest_id = ANY($1)
		UNION ALL SELECT guest_id, appointment_id::TEXT, status FROM appointments WHERE guest_id = ANY($1)`, guests)
	if err != nil { // no appointments table yet
		rows, err = e.DB.Query(ctx, `SELECT guest_id, reservation_id::TEXT, status FROM reservations WHERE guest_id = ANY($1)`, guests)
	}
	if err != nil {
		c.Detail = "query: " + err.Error()
		return c
	}
	for rows.Next() {
		var g, id, st string
		if rows.Scan(&g, &id, &st) == nil {
			if _, ours := byID[id]; ours && want[g] != nil {
				want[g][id] = st
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		c.Detail = "query: " + err.Error()
		return c
	}
	deadline := time.Now().Add(20 * time.Second)
	var diff []string
	for {
		diff = diff[:0]
		for _, g := range guests {
			got, err := e.guestView(ctx, g)
			if err != nil {
				diff = append(diff, g+": "+err.Error())
				continue
			}
			for id, st := range want[g] {
				if got[id] != st {
					diff = append(diff, fmt.Sprintf("%s/%s: read model %q, database %q", g, shortID(id), got[id], st))
				}
			}
		}
		if len(diff) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if len(diff) > 0 {
		c.Detail = fmt.Sprintf("%d difference(s) after 20 s: %s", len(diff), strings.Join(diff[:min(len(diff), 8)], "; "))
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d guest(s) sampled, all reservations present with the database's status", len(guests))
	return c
}

func (e *Env) guestView(ctx context.Context, guest string) (map[string]string, error) {
	got := map[string]string{}
	cursor := ""
	for range 50 { // pages, bounded
		path := "/v1/guests/" + guest + "/reservations?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ReadModelURL+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+e.Client.Guest(guest))
		resp, err := e.Client.HTTP.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		r := client.Response{Status: resp.StatusCode}
		err = decodeBody(resp, &page)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %d", r.Status)
		}
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			got[it.ID] = it.Status
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	return got, nil
}
