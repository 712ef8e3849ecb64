package router

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// outgoing builds the request http.NewRequestWithContext builds from the
// URL's text: the same bytes on the wire, the same fields a transport or
// an in-process handler reads, the same body again from GetBody.
func TestOutgoingIsNewRequest(t *testing.T) {
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "attempt")
	for _, c := range []struct {
		name, target, path, rawPath, query string
		body                               []byte
	}{
		{"post", "http://127.0.0.1:8081", "/v1/hotels/h1/reservations", "", "", []byte(`{"quantity":1}`)},
		{"get without body", "http://booking.us-east:8081", "/v1/hotels/h1/availability", "", "check_in=2027-03-01&check_out=2027-03-02", nil},
		{"empty body", "https://booking.eu-west", "/v1/hotels/h1/reservations/r1/cancel", "", "", []byte{}},
		{"escaped path", "http://127.0.0.1:8081", "/v1/hotels/a/b c", "/v1/hotels/a%2Fb%20c", "q=a%2Fb", []byte("x")},
		{"base path", "http://127.0.0.1:8081/prefix", "/v1/hotels", "", "dry_run=1", []byte("{}")},
		{"empty port", "http://localhost:", "/v1/hotels", "", "", nil},
		{"user and fragment", "http://u:p@127.0.0.1:9#frag", "/v1/x", "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, err := parseBase(c.target)
			if err != nil {
				t.Fatal(err)
			}
			// send's URL, as it was formatted for http.NewRequestWithContext.
			u := *target
			u.Path = target.Path + c.path
			if c.rawPath != "" {
				u.RawPath = target.Path + c.rawPath
			}
			u.RawQuery = c.query
			var rd io.Reader
			if c.body != nil {
				rd = bytes.NewReader(c.body)
			}
			want, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), rd)
			if err != nil {
				t.Fatal(err)
			}
			uc := u
			got := outgoing(ctx, http.MethodPost, &uc, c.body)
			if got.Context() != ctx {
				t.Error("the attempt's context is not the request's")
			}
			if got.Method != want.Method || got.Host != want.Host || got.URL.String() != want.URL.String() ||
				got.URL.Path != want.URL.Path || got.URL.EscapedPath() != want.URL.EscapedPath() ||
				got.URL.RequestURI() != want.URL.RequestURI() || got.ContentLength != want.ContentLength ||
				got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
				(got.Body == nil) != (want.Body == nil) || (got.Body == http.NoBody) != (want.Body == http.NoBody) ||
				(got.GetBody == nil) != (want.GetBody == nil) {
				t.Fatalf("outgoing: %+v\nNewRequest: %+v", got, want)
			}
			// Twice: the second write reads GetBody's copy, as a
			// transport's retry does.
			for range 2 {
				if got.GetBody != nil {
					got.Body, _ = got.GetBody()
					want.Body, _ = want.GetBody()
				}
				got.Header, want.Header = http.Header{"X-A": {"1"}}, http.Header{"X-A": {"1"}}
				var gw, ww bytes.Buffer
				if err := got.Write(&gw); err != nil {
					t.Fatal(err)
				}
				if err := want.Write(&ww); err != nil {
					t.Fatal(err)
				}
				if gw.String() != ww.String() {
					t.Fatalf("on the wire:\n%q\nNewRequest's:\n%q", gw.String(), ww.String())
				}
			}
		})
	}
}
