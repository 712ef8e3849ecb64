package readmodel

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/view"
)

func TestCursorRejectsTampering(t *testing.T) {
	t.Parallel()
	c := cursorCodec{key: []byte("k")}
	pos := view.Position{SortAt: time.Unix(100, 0).UTC(), Kind: "hotel", PartitionID: "p", ID: "i"}
	s := c.encode("g\x00\x00", pos)
	got, err := c.decode("g\x00\x00", s)
	if err != nil || got != pos {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	for _, bad := range []string{s[:len(s)-1], "x" + s, s + "=", "", "a.b"} {
		if _, err := c.decode("g\x00\x00", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := c.decode("other\x00\x00", s); err == nil {
		t.Error("accepted a cursor of another guest")
	}
}
