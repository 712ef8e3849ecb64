package notify_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Local stand-ins of the providers' HTTP APIs, speaking their wire formats
// as documented: what the senders put on the wire is checked here, not
// what the client libraries were asked to do.

// twilioStandIn is Twilio's Messages API: POST
// /2010-04-01/Accounts/{AccountSid}/Messages.json, form-encoded, HTTP basic
// auth with the account SID (or an API key SID) and its secret.
type twilioStandIn struct {
	*httptest.Server
	user, pass, account string

	mu   sync.Mutex
	sent []map[string]string // the forms of accepted messages
	// reject answers every message with this Twilio error code (400).
	reject int
}

func newTwilioStandIn(t *testing.T, account, user, pass string) *twilioStandIn {
	t.Helper()
	s := &twilioStandIn{user: user, pass: pass, account: account}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *twilioStandIn) serve(w http.ResponseWriter, r *http.Request) {
	twilioError := func(status, code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg, "status": status,
			"more_info": "https://www.twilio.com/docs/errors/" + itoa(code)})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/2010-04-01/Accounts/"+s.account+"/Messages.json" {
		twilioError(http.StatusNotFound, 20404, "The requested resource "+r.URL.Path+" was not found")
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != s.user || p != s.pass {
		twilioError(http.StatusUnauthorized, 20003, "Authenticate")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		twilioError(http.StatusBadRequest, 20001, "want a form, got "+ct)
		return
	}
	if err := r.ParseForm(); err != nil {
		twilioError(http.StatusBadRequest, 20001, err.Error())
		return
	}
	form := map[string]string{}
	for k := range r.PostForm {
		form[k] = r.PostForm.Get(k)
	}
	switch {
	case form["To"] == "" || form["Body"] == "":
		twilioError(http.StatusBadRequest, 21604, "A 'To' phone number and a 'Body' are required.")
		return
	case form["From"] == "" && form["MessagingServiceSid"] == "":
		twilioError(http.StatusBadRequest, 21603, "A 'From' or 'MessagingServiceSid' parameter is required")
		return
	}
	s.mu.Lock()
	reject := s.reject
	if reject == 0 {
		s.sent = append(s.sent, form)
	}
	n := len(s.sent)
	s.mu.Unlock()
	if reject != 0 {
		twilioError(http.StatusBadRequest, reject, "The 'To' number "+form["To"]+" is not a valid phone number.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"sid": "SM" + strings.Repeat("0", 30) + itoa(n), "account_sid": s.account,
		"to": form["To"], "from": form["From"], "body": form["Body"], "status": "queued", "num_segments": "1"})
}

func (s *twilioStandIn) messages() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]string(nil), s.sent...)
}

// fcmStandIn is Google's OAuth 2 token endpoint for a service account (a
// JWT-bearer grant signed with the account's key) and FCM's HTTP v1 API:
// POST /v1/projects/{project}/messages:send with the access token.
type fcmStandIn struct {
	*httptest.Server
	project string
	key     *rsa.PrivateKey
	email   string

	mu     sync.Mutex
	tokens int              // access tokens issued
	sent   []map[string]any // the "message" of accepted sends
	// unregistered tokens are answered 404 UNREGISTERED, as FCM does.
	unregistered map[string]bool
}

const fcmAccessToken = "ya29.stand-in-token"

func newFCMStandIn(t *testing.T, project string) *fcmStandIn {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &fcmStandIn{project: project, key: key, email: "berth-push@" + project + ".iam.gserviceaccount.com", unregistered: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// credentialsJSON is a service account key whose token_uri is the stand-in.
func (s *fcmStandIn) credentialsJSON(t *testing.T) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(s.key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": s.project, "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": s.email, "client_id": "1", "token_uri": s.URL + "/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *fcmStandIn) serve(w http.ResponseWriter, r *http.Request) {
	fcmError := func(status int, state, msg, code string) {
		body := map[string]any{"code": status, "message": msg, "status": state}
		if code != "" {
			body["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/token":
		if err := s.checkAssertion(r); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": err.Error()})
			return
		}
		s.mu.Lock()
		s.tokens++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fcmAccessToken, "expires_in": 3600, "token_type": "Bearer"})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/projects/"+s.project+"/messages:send":
		if r.Header.Get("Authorization") != "Bearer "+fcmAccessToken {
			fcmError(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "")
			return
		}
		var req struct {
			Message map[string]any `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Message == nil {
			fcmError(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.", "INVALID_ARGUMENT")
			return
		}
		token, _ := req.Message["token"].(string)
		s.mu.Lock()
		gone := s.unregistered[token]
		if !gone {
			s.sent = append(s.sent, req.Message)
		}
		n := len(s.sent)
		s.mu.Unlock()
		if gone {
			fcmError(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"name": "projects/" + s.project + "/messages/" + itoa(n)})
	default:
		fcmError(http.StatusNotFound, "NOT_FOUND", "no route "+r.Method+" "+r.URL.Path, "")
	}
}

// checkAssertion verifies the JWT-bearer grant: RS256 over header.payload
// with the service account's key, issued by its e-mail for this endpoint.
func (s *fcmStandIn) checkAssertion(r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return err
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		return errorf("grant_type %q", g)
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		return errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return errorf("bad signature: %v", err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	var claims struct {
		Iss, Aud, Scope string
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return err
	}
	if claims.Iss != s.email || claims.Aud != s.URL+"/token" || !strings.Contains(claims.Scope, "auth/cloud-platform") {
		return errorf("claims %+v", claims)
	}
	return nil
}

func (s *fcmStandIn) messages() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.sent...)
}
