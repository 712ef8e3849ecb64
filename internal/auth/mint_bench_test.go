package auth

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

func BenchmarkMint(b *testing.B) {
	tk, _ := New(secret)
	p := berth.Principal{Subject: "base-0123456789ab", Role: berth.RoleGuest}
	now := time.Now()
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tk.mintFast(p, now, time.Hour)
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = tk.mintLibrary(p, now, time.Hour)
		}
	})
}
