package readmodel

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/view"
)

// FuzzCursorDecode feeds arbitrary cursors to the decoder: it never panics,
// rejects anything it did not sign for this scope, and round-trips what it
// encoded.
func FuzzCursorDecode(f *testing.F) {
	c := cursorCodec{key: []byte("cursor-key-cursor-key-cursor-key")}
	good := c.encode("guest-1|hotel|", view.Position{SortAt: time.Unix(1_800_000_000, 0).UTC(), Kind: "hotel", PartitionID: "p", ID: "r"})
	for _, s := range []string{good, "", ".", "e30.AAAA", good + "x", good[:len(good)-2], "%%%", "a.b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.decode("guest-1|hotel|", s)
		if err != nil {
			return
		}
		if _, err := c.decode("guest-2|hotel|", s); err == nil {
			t.Fatalf("cursor %q decodes for another guest", s)
		}
		again, err := c.decode("guest-1|hotel|", c.encode("guest-1|hotel|", p))
		if err != nil || again.ID != p.ID || !again.SortAt.Equal(p.SortAt) {
			t.Fatalf("round trip of %+v failed: %+v %v", p, again, err)
		}
	})
}
