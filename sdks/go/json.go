package conveyor

import (
	"context"
	"encoding/json"
	"fmt"
)

// jsonContentType is the content type of the JSON helpers' payloads.
const jsonContentType = "application/json"

// EnqueueJSON encodes v with encoding/json and enqueues it as a task of
// taskType with content type application/json. The JSON shape is Go's
// encoding/json default (exported field names, or their json tags), which
// the task's consumers, in any language, must agree on. An option in opts
// may override the content type. See Client.Enqueue for the rest.
func EnqueueJSON[T any](ctx context.Context, c *Client, taskType string, v T, opts ...TaskOption) (*TaskInfo, error) {
	t, err := NewJSONTask(taskType, v, opts...)
	if err != nil {
		return nil, err
	}
	return c.enqueue(ctx, t)
}

// NewJSONTask is NewTask with v encoded by encoding/json as the payload and
// content type application/json (an option in opts may override it). It
// fails only if v cannot be encoded.
func NewJSONTask(taskType string, v any, opts ...TaskOption) (*Task, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("conveyor: encode the %s payload as JSON: %w", taskType, err)
	}
	return NewTask(taskType, payload, append([]TaskOption{ContentType(jsonContentType)}, opts...)...), nil
}
