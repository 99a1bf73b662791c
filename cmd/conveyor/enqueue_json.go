package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
)

// checkJSONPayload refuses a payload that is not valid JSON when the
// content type says JSON: --content-type application/json (or a +json
// type), or none, which the server stores as application/json. Workers
// decode such a payload as JSON; one that is not fails every attempt, long
// after the typo. An empty payload is no payload and passes.
func checkJSONPayload(contentType string, payload []byte) error {
	if len(payload) == 0 || !isJSONType(contentType) {
		return nil
	}
	var v json.RawMessage
	err := json.Unmarshal(payload, &v)
	if err == nil {
		return nil
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		err = fmt.Errorf("%w at byte %d", err, syntax.Offset)
	}
	return withCode(exitRefused, "payload is not valid JSON: %v; use --content-type to send other bytes", err)
}

// isJSONType reports whether the content type is JSON; "" is the server's
// default, application/json.
func isJSONType(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false // the server judges a malformed type; it is not ours to call JSON
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
