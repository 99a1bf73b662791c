package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secretPrefix starts every push secret, as Standard Webhooks writes them.
const secretPrefix = "whsec_"

// minSecretBytes is the shortest key accepted: 24 bytes (192 bits), as
// Standard Webhooks asks of a secret.
const minSecretBytes = 24

// ParseSecret decodes a secret written "whsec_" followed by the base64 of
// its key (24 to 64 bytes).
func ParseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(s), secretPrefix)
	if !ok {
		return nil, errors.New(`push secret must start with "whsec_" followed by the base64 of its key`)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("push secret: the part after whsec_ is not base64: %w", err)
	}
	if len(key) < minSecretBytes || len(key) > 64 {
		return nil, fmt.Errorf("push secret: the key must be %d..64 bytes, got %d", minSecretBytes, len(key))
	}
	return key, nil
}

// signedContent is what a signature covers: the message id, the
// timestamp and the body, joined by dots.
func signedContent(id string, ts int64, body []byte) []byte {
	b := make([]byte, 0, len(id)+24+len(body))
	b = append(b, id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '.')
	return append(b, body...)
}

// Sign is the webhook-signature header of a request: one "v1,<base64
// HMAC-SHA256>" entry per key, separated by spaces (so an endpoint that
// knows any one of the keys can verify it, which is how a key rotates).
func Sign(keys [][]byte, id string, at time.Time, body []byte) string {
	content := signedContent(id, at.Unix(), body)
	entries := make([]string, len(keys))
	for i, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(content)
		entries[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(entries, " ")
}
