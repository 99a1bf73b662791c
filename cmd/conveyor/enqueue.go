package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/alecthomas/kong"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// enqueueCmd is `conveyor enqueue TYPE [PAYLOAD]`. Options left out are not
// sent, so the server's defaults apply.
type enqueueCmd struct {
	clientFlags

	Type           string            `arg:"" help:"Task type (the handler routing key)."`
	Payload        *string           `arg:"" optional:"" help:"Payload text; '-' reads it from standard input. Defaults to empty."`
	PayloadFile    string            `name:"payload-file" placeholder:"FILE" help:"Read the payload from FILE ('-' for standard input)."`
	Queue          string            `complete:"queue" help:"Queue (server default: default)."`
	Priority       int32             `placeholder:"N" help:"Priority, 1 (lowest) to 9 (highest) (server default: 4)."`
	MaxRetry       int32             `name:"max-retry" placeholder:"N" help:"Retries before the task is archived (server default: 25)."`
	ProcessIn      time.Duration     `name:"process-in" help:"Delay the task by this long (e.g. 90s, 1h)."`
	ProcessAt      time.Time         `name:"process-at" placeholder:"RFC3339" help:"Delay the task until this time (RFC 3339, e.g. 2030-01-02T15:04:05Z)."`
	Unique         string            `placeholder:"KEY" help:"Unique key: fail while an incomplete task holds it."`
	UniqueTTL      time.Duration     `name:"unique-ttl" help:"How long the unique key is held (default: until the task completes)."`
	Timeout        time.Duration     `help:"Bound on one attempt."`
	Deadline       time.Time         `placeholder:"RFC3339" help:"Time after which the task must not run (RFC 3339)."`
	Retention      *time.Duration    `placeholder:"DURATION" help:"How long to keep the task once completed; 0s purges it at once (server default: 24h)."`
	TaskID         string            `name:"task-id" placeholder:"ULID" help:"Client-assigned task id; a repeat fails with already_exists."`
	Metadata       map[string]string `mapsep:"none" placeholder:"KEY=VALUE" help:"Metadata entry (repeatable)."`
	ContentType    string            `name:"content-type" help:"Payload content type (server default: application/json). A JSON payload (application/json or +json, the default) must be valid JSON."`
	Group          string            `placeholder:"KEY" help:"Aggregation group: the task waits (aggregating) with the queue's other tasks of KEY and is delivered with them as one batch."`
	ConcurrencyKey string            `name:"concurrency-key" placeholder:"KEY" help:"Concurrency key: tasks sharing it run at most the queue's concurrency limit at once."`
}

// Run enqueues the task and prints it as committed.
func (c *enqueueCmd) Run(k *kong.Context, in stdin) error {
	payload, err := readPayload(c.Payload, c.PayloadFile, in)
	if err != nil {
		return err
	}
	if err := checkJSONPayload(c.ContentType, payload); err != nil {
		return err
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	client, err := cn.sdk()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	info, err := client.Enqueue(ctx, c.Type, payload, c.options()...)
	if err != nil {
		return err
	}
	return c.printTask(k.Stdout, info.Proto())
}

// readPayload is a payload given as an argument (arg, '-' for standard
// input) or with --payload-file (file, '-' too); nil when neither is.
func readPayload(arg *string, file string, in stdin) ([]byte, error) {
	switch {
	case arg != nil && file != "":
		return nil, usageErrorf("give the payload as an argument or with --payload-file, not both")
	case arg != nil && *arg == "-", file == "-":
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, fmt.Errorf("read the payload from standard input: %w", err)
		}
		return b, nil
	case arg != nil:
		return []byte(*arg), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read --payload-file: %w", err)
		}
		return b, nil
	}
	return nil, nil
}

// options maps the flags given to task options; the server validates them.
func (c *enqueueCmd) options() []conveyor.TaskOption {
	var opts []conveyor.TaskOption
	add := func(set bool, o conveyor.TaskOption) {
		if set {
			opts = append(opts, o)
		}
	}
	add(c.Queue != "", conveyor.Queue(c.Queue))
	add(c.Priority != 0, conveyor.Priority(int(c.Priority)))
	add(c.MaxRetry != 0, conveyor.MaxRetry(int(c.MaxRetry)))
	add(c.ProcessIn != 0, conveyor.ProcessIn(c.ProcessIn))
	add(!c.ProcessAt.IsZero(), conveyor.ProcessAt(c.ProcessAt))
	add(c.Unique != "" || c.UniqueTTL != 0, conveyor.Unique(c.Unique, c.UniqueTTL))
	add(c.Timeout != 0, conveyor.Timeout(c.Timeout))
	add(!c.Deadline.IsZero(), conveyor.Deadline(c.Deadline))
	if c.Retention != nil {
		opts = append(opts, conveyor.Retention(*c.Retention))
	}
	add(c.TaskID != "", conveyor.TaskID(c.TaskID))
	add(len(c.Metadata) > 0, conveyor.Metadata(c.Metadata))
	add(c.ContentType != "", conveyor.ContentType(c.ContentType))
	add(c.Group != "", conveyor.Group(c.Group))
	add(c.ConcurrencyKey != "", conveyor.ConcurrencyKey(c.ConcurrencyKey))
	return opts
}
