package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// TestClinicRollingMaterialization: the rolling job keeps the default
// 8-week window of slots for clinics homed in its region, creates nothing
// twice, extends by a day as days pass, and leaves other regions' clinics alone.
func TestClinicRollingMaterialization(t *testing.T) {
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	cs := postgres.NewClinicStore(postgres.NewStore(db, "us-east", 0), 0)
	mk := func(region string) string {
		c, err := cs.CreateClinic(ctx, appointment.Clinic{ID: uuid.NewString(), Name: "C", Timezone: "Asia/Kolkata", HomeRegion: region})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	home, away := mk("us-east"), mk("eu-west")
	var weekly []appointment.Window
	for d := 1; d <= 7; d++ {
		weekly = append(weekly, appointment.Window{Weekday: d, Start: "09:00", End: "11:00"})
	}
	if _, err := cs.CreateDoctor(ctx, appointment.Doctor{ID: uuid.NewString(), ClinicID: home, Name: "D", SlotMinutes: 30, Weekly: weekly}); err != nil {
		t.Fatal(err)
	}
	// A clinic homed elsewhere cannot get a doctor here: the fence refuses.
	_, err := cs.CreateDoctor(ctx, appointment.Doctor{ID: uuid.NewString(), ClinicID: away, Name: "D", SlotMinutes: 30, Weekly: weekly})
	if berth.ErrorCode(err) != berth.CodeMisdirected {
		t.Fatalf("doctor for a clinic homed elsewhere: %v", err)
	}
	now := time.Now()
	n, err := cs.MaterializeRolling(ctx, now, appointment.DefaultRollingWeeks)
	if err != nil || n != 8*7*4 {
		t.Fatalf("first run created %d (%v), want %d", n, err, 8*7*4)
	}
	if n, err := cs.MaterializeRolling(ctx, now, appointment.DefaultRollingWeeks); err != nil || n != 0 {
		t.Fatalf("second run created %d (%v), want 0", n, err)
	}
	if n, err := cs.MaterializeRolling(ctx, now.Add(24*time.Hour), appointment.DefaultRollingWeeks); err != nil || n != 4 {
		t.Fatalf("a day later created %d (%v), want 4", n, err)
	}
	var total int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*) FROM slots WHERE clinic_id = $1`, home).Scan(&total); err != nil || total != 8*7*4+4 {
		t.Fatalf("%d slots (%v)", total, err)
	}
}
