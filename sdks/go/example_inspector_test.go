package conveyor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// An Inspector does from code what an operator does with the CLI: here,
// stop a queue's dispatch while capping its active tasks, then let it go
// again.
func ExampleNewInspector() {
	insp, err := conveyor.NewInspector("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := insp.PauseQueue(ctx, "emails"); err != nil {
		log.Fatal(err)
	}
	// Only MaxActive is stored; every other setting keeps its value.
	cfg, err := insp.UpdateQueueConfig(ctx, conveyor.QueueConfig{Queue: "emails", MaxActive: 10}, conveyor.QueueSettingMaxActive)
	if err != nil {
		log.Fatal(err)
	}
	q, err := insp.ResumeQueue(ctx, "emails")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Name, q.Pending, cfg.MaxActive)
}

// Run again the archived tasks that failed for one reason, going through
// the queue's archive a page at a time.
func ExampleInspector_AllTasks() {
	insp, err := conveyor.NewInspector("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	archived := conveyor.ListTasksOptions{Queue: "emails", State: conveyor.TaskStateArchived}
	for t, err := range insp.AllTasks(ctx, archived) {
		if err != nil {
			log.Fatal(err)
		}
		if !strings.Contains(t.LastError, "smtp: 421") {
			continue
		}
		if _, err := insp.RunTask(ctx, t.ID); err != nil && !errors.Is(err, conveyor.ErrNotFound) {
			log.Fatal(err)
		}
	}
}

// Act on every task of a queue in one state, on the server, with its
// progress as it goes.
func ExampleInspector_BulkTasks() {
	insp, err := conveyor.NewInspector("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	done, err := insp.BulkTasks(context.Background(), conveyor.TaskActionDelete, conveyor.BulkTasksOptions{
		Queue: "reports",
		State: conveyor.TaskStateCompleted,
		Progress: func(p conveyor.BulkProgress) {
			fmt.Printf("%d of about %d\n", p.Succeeded+p.Failed, p.Total)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Succeeded, "deleted;", done.Failed, "changed state meanwhile")
}

// A missing task is ErrNotFound, as from a Client.
func ExampleInspector_GetTask() {
	insp, err := conveyor.NewInspector("http://127.0.0.1:7420")
	if err != nil {
		log.Fatal(err)
	}
	_, err = insp.GetTask(context.Background(), "01J8Z3Y0000000000000000000")
	fmt.Println(errors.Is(err, conveyor.ErrNotFound))
}
