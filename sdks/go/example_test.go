package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/oklog/ulid/v2"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// The examples that call a server expect one on the default address, such
// as `conveyor server` started in another terminal; they have no output
// to check.

// Enqueue one task with the server's defaults: queue "default", priority
// 4, 25 retries.
func Example_enqueue() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	info, err := client.Enqueue(context.Background(), "email:welcome", []byte(`{"to":"ada@example.com"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, info.Queue, info.State)
}

// Enqueue a Go value as a JSON payload. Workers in any language decode the
// same JSON, so its shape (here, the json tags) is the contract.
func Example_enqueueJSON() {
	type welcome struct {
		To   string `json:"to"`
		Name string `json:"name"`
	}
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	info, err := conveyor.EnqueueJSON(context.Background(), client, "email:welcome",
		welcome{To: "ada@example.com", Name: "Ada"}, conveyor.Queue("emails"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ContentType) // application/json
}

// Options are plain values: each sets the field of the same name of the
// request, which Task.Proto shows without calling a server.
func Example_enqueueOptions() {
	task := conveyor.NewTask("report:build", nil,
		conveyor.Queue("reports"),
		conveyor.Priority(8),
		conveyor.ProcessIn(10*time.Minute),
		conveyor.Unique("report:2030-01", 0), // held until the task completes
		conveyor.Retention(0),                // purge soon after it completes
		conveyor.RetryPolicy(conveyor.RetryStrategyExponential, time.Second, time.Minute),
	)
	req := task.Proto()
	o := req.GetOptions()
	fmt.Println("queue:", req.GetQueue())
	fmt.Println("priority:", o.GetPriority())
	fmt.Println("process_in:", o.GetProcessIn().AsDuration())
	fmt.Println("unique_key:", o.GetUniqueKey(), "unique_ttl set:", o.GetUniqueTtl() != nil)
	fmt.Println("retention set:", o.GetRetention() != nil, "to", o.GetRetention().AsDuration())
	fmt.Println("retry:", o.GetRetryPolicy().GetStrategy())
	// Output:
	// queue: reports
	// priority: 8
	// process_in: 10m0s
	// unique_key: report:2030-01 unique_ttl set: false
	// retention set: true to 0s
	// retry: RETRY_STRATEGY_EXPONENTIAL
}

// A task that must never run twice: the worker asks the server before it
// starts it, and a start whose outcome is lost is archived, not rerun.
// SkipRetry keeps a failure from being retried either.
func ExampleAtMostOnce() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	info, err := client.Enqueue(context.Background(), "payment:capture", []byte(`{"order":"A-1042"}`),
		conveyor.AtMostOnce())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, info.Options.AtMostOnce)
}

// The address must be a URL: http:// for HTTP/2 without TLS, https:// for
// TLS. NewClient does not connect, so a bad address is the only error.
func ExampleNewClient() {
	_, err := conveyor.NewClient("127.0.0.1:7420")
	fmt.Println(err)

	client, err := conveyor.NewClient("http://127.0.0.1:7420",
		conveyor.WithToken(os.Getenv("CONVEYOR_TOKEN")),
		conveyor.WithProtocol(conveyor.ProtocolConnect), // HTTP/JSON, like curl would send
	)
	fmt.Println(client != nil, err)
	// Output:
	// conveyor: address "127.0.0.1:7420" must be an http:// or https:// URL
	// true <nil>
}

// An address may name several servers of one service, separated by
// commas: the Client moves a call to the next one when the server in use
// cannot be reached or answers unavailable. Each URL is checked, and a
// server named twice is refused.
func ExampleNewClient_severalServers() {
	_, err := conveyor.NewClient("http://node1:7420,http://node1:7420/")
	fmt.Println(err)

	client, err := conveyor.NewClient("http://node1:7420,http://node2:7420")
	fmt.Println(client != nil, err)
	// Output:
	// conveyor: address "http://node1:7420/" (server 2 of 2) names the same server as server 1: list each server once
	// true <nil>
}

// Delay a task, keep it unique for an hour and bound each attempt.
func ExampleClient_Enqueue() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	info, err := client.Enqueue(context.Background(), "invoice:remind", []byte(`{"invoice":42}`),
		conveyor.Queue("billing"),
		conveyor.ProcessIn(24*time.Hour),
		conveyor.Unique("invoice:42:remind", time.Hour),
		conveyor.Timeout(30*time.Second),
		conveyor.MaxRetry(5),
		conveyor.MetadataKV("tenant", "acme"),
	)
	if errors.Is(err, conveyor.ErrAlreadyExists) {
		fmt.Println("a reminder is already queued")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.State, "until", info.NextProcessAt) // scheduled until ...
}

// A client-assigned TaskID makes an enqueue safe to retry: a repeat fails
// with ErrAlreadyExists instead of enqueueing the task twice.
func ExampleClient_Enqueue_idempotent() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	id := ulid.Make().String() // store it with the order, before enqueueing
	for attempt := 0; attempt < 2; attempt++ {
		_, err := client.Enqueue(context.Background(), "order:ship", []byte(`{"order":7}`), conveyor.TaskID(id))
		switch {
		case err == nil:
			fmt.Println("enqueued", id)
		case errors.Is(err, conveyor.ErrAlreadyExists):
			fmt.Println("already enqueued", id)
		case errors.Is(err, conveyor.ErrUnavailable):
			continue // the server is down or restarting: try again
		default:
			log.Fatal(err)
		}
	}
}

// Items of a batch succeed or fail on their own.
func ExampleClient_EnqueueBatch() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	var tasks []*conveyor.Task
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		t, err := conveyor.NewJSONTask("email:digest", map[string]string{"to": to}, conveyor.Queue("emails"))
		if err != nil {
			log.Fatal(err)
		}
		tasks = append(tasks, t)
	}
	results, err := client.EnqueueBatch(context.Background(), tasks)
	if err != nil {
		log.Fatal(err) // the whole call failed: nothing was enqueued
	}
	for i, r := range results {
		if r.Err != nil {
			fmt.Printf("task %d: %v\n", i, r.Err)
			continue
		}
		fmt.Printf("task %d: %s\n", i, r.Task.ID)
	}
}

// A transaction enqueues all of its tasks or none. With client-assigned
// ids, a task can depend on another of the same transaction.
func ExampleClient_EnqueueTx() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	resize := ulid.Make().String()
	infos, err := client.EnqueueTx(context.Background(), []*conveyor.Task{
		conveyor.NewTask("image:resize", []byte(`{"image":"cat.png"}`), conveyor.TaskID(resize)),
		conveyor.NewTask("image:publish", []byte(`{"image":"cat.png"}`),
			conveyor.DependsOn(resize, conveyor.OnFailureCascadeCancel)),
	})
	if err != nil {
		log.Fatal(err) // nothing was enqueued
	}
	fmt.Println(infos[0].State, infos[1].State) // pending blocked
}

// Look a task up, such as to poll for its result.
func ExampleClient_GetTask() {
	client, err := conveyor.NewClient("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	info, err := client.GetTask(context.Background(), "01JC0000000000000000000000")
	if errors.Is(err, conveyor.ErrNotFound) {
		fmt.Println("no such task (or it was purged after its retention)")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s: %d/%d retries, last error %q, result %q\n",
		info.ID, info.State, info.Retried, info.MaxRetry, info.LastError, info.Result)
}
