package conveyor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A push request is signed as Standard Webhooks sign theirs: the server
// sends the attempt id as webhook-id, its clock in Unix seconds as
// webhook-timestamp, and in webhook-signature one "v1,<base64 HMAC-SHA256>"
// entry per secret it holds, separated by spaces, each over
// "<webhook-id>.<webhook-timestamp>.<body>". The endpoint accepts the
// request when any entry matches the HMAC under any of its own secrets,
// compared in constant time, the timestamp is within the tolerance of its
// clock, and the id is not one it accepted before (a replay).

// The Standard Webhooks headers.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// pushSecretPrefix starts every push secret, as Standard Webhooks write them.
const pushSecretPrefix = "whsec_"

// Bounds of a push secret's key, the server's: at least 24 bytes (192
// bits), as Standard Webhooks ask, and at most 64 (an HMAC-SHA256 block).
const (
	minPushKeyBytes = 24
	maxPushKeyBytes = 64
)

// parsePushSecret decodes a secret written "whsec_" followed by the base64
// of its key. Its errors never quote the secret.
func parsePushSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, pushSecretPrefix)
	if !ok {
		return nil, errors.New(`it must start with "whsec_" followed by the base64 of its key`)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, errors.New("the part after whsec_ is not standard base64")
	}
	if len(key) < minPushKeyBytes || len(key) > maxPushKeyBytes {
		return nil, fmt.Errorf("its key must be %d..%d bytes, got %d", minPushKeyBytes, maxPushKeyBytes, len(key))
	}
	return key, nil
}

// pushRefusal is a request refused before its handler runs: the HTTP
// status and a message naming what is wrong, sent as plain text.
type pushRefusal struct {
	status int
	msg    string
}

func refuse(status int, format string, args ...any) *pushRefusal {
	return &pushRefusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// webhookHeaders are the signature headers of a signed request.
type webhookHeaders struct {
	id, timestamp, signature string
	at                       time.Time // the timestamp
}

// pushVerifier checks the signatures of push requests.
type pushVerifier struct {
	keys      [][]byte
	dev       bool
	tolerance time.Duration
	replay    *replayCache
}

// checkHeaders checks a request's signature headers and timestamp at now,
// before its body is read. It returns nil headers for a request accepted
// unverified: one with no webhook-signature in development mode, or any
// in development mode with no secret to check it against.
func (v *pushVerifier) checkHeaders(h http.Header, now time.Time) (*webhookHeaders, *pushRefusal) {
	wh := &webhookHeaders{id: h.Get(headerWebhookID), timestamp: h.Get(headerWebhookTimestamp),
		signature: h.Get(headerWebhookSignature)}
	if v.dev && (wh.signature == "" || len(v.keys) == 0) {
		return nil, nil
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{headerWebhookID, wh.id}, {headerWebhookTimestamp, wh.timestamp}, {headerWebhookSignature, wh.signature},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, refuse(http.StatusUnauthorized,
			"unsigned request: the %s header is missing; this endpoint accepts only requests signed with one of its push secrets",
			strings.Join(missing, ", "))
	}
	secs, err := strconv.ParseInt(wh.timestamp, 10, 64)
	if err != nil {
		return nil, refuse(http.StatusUnauthorized, "webhook-timestamp %q is not a decimal count of Unix seconds",
			truncateName(wh.timestamp))
	}
	wh.at = time.Unix(secs, 0)
	if skew := now.Sub(wh.at); skew > v.tolerance {
		return nil, refuse(http.StatusUnauthorized, "stale request: webhook-timestamp is %s old, past the tolerance of %s",
			skew.Truncate(time.Second), v.tolerance)
	} else if -skew > v.tolerance {
		return nil, refuse(http.StatusUnauthorized,
			"webhook-timestamp is %s in the future, past the tolerance of %s (is a clock wrong?)",
			(-skew).Truncate(time.Second), v.tolerance)
	}
	return wh, nil
}

// checkSignature checks that one of wh's signatures is the HMAC of the
// request under one of the keys, then that wh.id was not accepted before.
func (v *pushVerifier) checkSignature(wh *webhookHeaders, body []byte, now time.Time) *pushRefusal {
	macs := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(wh.id))
		m.Write([]byte{'.'})
		m.Write([]byte(wh.timestamp))
		m.Write([]byte{'.'})
		m.Write(body)
		macs[i] = m.Sum(nil)
	}
	if !anySignatureMatches(wh.signature, macs) {
		return refuse(http.StatusUnauthorized,
			"bad signature: no v1 entry of webhook-signature matches the request under any of this endpoint's push secrets")
	}
	switch err := v.replay.admit(wh.id, wh.at.Add(v.tolerance), now); {
	case errors.Is(err, errReplayed):
		return refuse(http.StatusConflict, "replayed request: webhook-id %q was already accepted", truncateName(wh.id))
	case errors.Is(err, errForgotten):
		return refuse(http.StatusUnauthorized,
			"stale request: webhook-timestamp is older than the requests this endpoint can still check for replays")
	}
	return nil
}

// anySignatureMatches reports whether an entry of header, "v1,<base64>"
// entries separated by spaces, is one of macs. Entries of other versions
// are skipped, as Standard Webhooks ask.
func anySignatureMatches(header string, macs [][]byte) bool {
	for entry := range strings.FieldsSeq(header) {
		enc, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, mac := range macs {
			if hmac.Equal(sig, mac) {
				return true
			}
		}
	}
	return false
}
