package wan

import (
	"testing"
	"time"
)

func TestRTTIsSymmetric(t *testing.T) {
	t.Parallel()
	regions := []string{"us-east", "eu-west", "ap-south"}
	for _, a := range regions {
		for _, b := range regions {
			ab, ok1 := RTT(a, b)
			ba, ok2 := RTT(b, a)
			if !ok1 || !ok2 || ab != ba || (a == b) != (ab == 0) {
				t.Errorf("RTT(%s,%s)=%v,%v RTT(%s,%s)=%v,%v", a, b, ab, ok1, b, a, ba, ok2)
			}
		}
	}
	if _, ok := RTT("us-east", "mars"); ok {
		t.Error("an unknown region has a round-trip time")
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	regions := []string{"us-east", "eu-west", "ap-south"}
	bookings := map[string]string{"us-east": "http://127.0.0.1:9080", "eu-west": "http://127.0.0.1:9081", "ap-south": "http://127.0.0.1:9082"}
	links, err := Plan(regions, bookings, "http://127.0.0.1:8090", 9700)
	if err != nil {
		t.Fatal(err)
	}
	// 3 routers × 2 foreign booking services + 2 routers far from the read model.
	if len(links) != 8 {
		t.Fatalf("%d links: %+v", len(links), links)
	}
	seen := map[string]bool{}
	for _, l := range links {
		if seen[l.Listen] {
			t.Errorf("port %s used twice", l.Listen)
		}
		seen[l.Listen] = true
	}
	urls, rm := RouterURLs(links, "eu-west", bookings, "http://127.0.0.1:8090")
	want := map[string]string{"eu-west": "http://127.0.0.1:9081", "us-east": "http://127.0.0.1:9710", "ap-south": "http://127.0.0.1:9712"}
	for r, u := range want {
		if urls[r] != u {
			t.Errorf("eu-west's router reaches %s at %s, want %s", r, urls[r], u)
		}
	}
	if rm != "http://127.0.0.1:9719" {
		t.Errorf("eu-west's read model URL %s", rm)
	}
	if _, rm := RouterURLs(links, "us-east", bookings, "http://127.0.0.1:8090"); rm != "http://127.0.0.1:8090" {
		t.Errorf("us-east reaches its own read model through %s", rm)
	}
	for _, l := range links {
		if l.Name == "ap-south-to-us-east-booking" && (l.OneWay != 95*time.Millisecond || l.Jitter != 9500*time.Microsecond) {
			t.Errorf("ap-south>us-east: one way %v ± %v", l.OneWay, l.Jitter)
		}
	}
	if _, err := Plan(regions, map[string]string{"us-east": "http://127.0.0.1:9080"}, "", 9700); err == nil {
		t.Error("a plan without every booking URL")
	}
}
