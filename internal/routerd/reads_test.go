package routerd

import (
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/config"
)

// BERTH_RATE_LIMIT_TIMEOUT: 50 ms unless set; a bad or zero value is a
// configuration error that names the variable.
func TestLimitTimeout(t *testing.T) {
	for _, v := range []string{"BERTH_RATE_LIMITS", "BERTH_WAITING_ROOMS", "BERTH_WAITING_ROOM_KEYS", "BERTH_TOKEN_SECRET", "BERTH_TRUSTED_PROXIES"} {
		t.Setenv(v, "") // the other settings loadReads checks, left valid
	}
	for _, tc := range []struct {
		val  string
		want time.Duration
		bad  bool
	}{{"", 50 * time.Millisecond, false}, {"250ms", 250 * time.Millisecond, false}, {"0s", 0, true}, {"soon", 0, true}, {"-1s", 0, true}} {
		t.Setenv("BERTH_RATE_LIMIT_TIMEOUT", tc.val)
		var errs config.Errors
		c := loadReads(&errs)
		err := errs.Err()
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "BERTH_RATE_LIMIT_TIMEOUT") {
				t.Errorf("%q: error %v, want one naming BERTH_RATE_LIMIT_TIMEOUT", tc.val, err)
			}
			continue
		}
		if err != nil || c.LimitTimeout != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.val, c.LimitTimeout, err, tc.want)
		}
	}
}
