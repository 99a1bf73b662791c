package brokertest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

func listCases() []testCase {
	return []testCase{
		{name: "PagesEveryState", fn: testListPages},
		{name: "Filters", fn: testListFilters},
		{name: "StableWhileEnqueuing", fn: testListStable},
		{name: "FollowsStateChanges", fn: testListFollows},
		{name: "EveryStateWhileTasksMove", fn: testListEveryStateWhileMoving},
		{name: "BadCursor", fn: testListBadCursor},
		{name: "Descending", fn: testListDescending},
		{name: "Brief", fn: testListBrief},
		{name: "AfterRestart", env: testListRestart},
	}
}

// listAll pages through p with the given page size and returns the ids in
// order, failing on a task returned twice.
func listAll(t *testing.T, b broker.Broker, p broker.ListParams, size int) []string {
	t.Helper()
	p.Limit = size
	var ids []string
	seen := map[string]bool{}
	for range 10_000 {
		page, err := b.ListTasks(t.Context(), p)
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		if len(page.Tasks) > size {
			t.Fatalf("a page of %d tasks, asked for %d", len(page.Tasks), size)
		}
		for _, task := range page.Tasks {
			if seen[task.ID] {
				t.Fatalf("task %s returned twice", task.ID)
			}
			seen[task.ID] = true
			ids = append(ids, task.ID)
		}
		if page.Next == "" {
			return ids
		}
		p.Cursor = page.Next
	}
	t.Fatal("the listing did not end")
	return nil
}

func testListPages(t *testing.T, b broker.Broker) {
	var want []string
	for i := range 7 {
		nt := NewTask("q")
		nt.Type = fmt.Sprintf("t%d", (i+1)%2) // t1 first: types interleave in id order
		want = append(want, EnqueueOne(t, b, T0, nt).ID)
	}
	ls := Lease(t, b, "s1", "q", 2, T0, TTL)
	Succeed(t, b, "s1", ls[0], T0)
	EnqueueOne(t, b, T0, NewTask("other"))
	got := listAll(t, b, broker.ListParams{Queue: "q"}, 3)
	if len(got) != 7 {
		t.Fatalf("listed %d tasks of q, want 7", len(got))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	// One state at a time, in id order whatever the types, across pages.
	pendingIDs := listAll(t, b, broker.ListParams{Queue: "q", State: pending}, 2)
	if len(pendingIDs) != 5 || !slices.IsSorted(pendingIDs) {
		t.Fatalf("pending, in pages of 2: %v; want 5 tasks in id order", pendingIDs)
	}
	typed := listAll(t, b, broker.ListParams{Queue: "q", State: pending, Type: "t1"}, 1)
	if len(typed) != 3 || !slices.IsSorted(typed) {
		t.Fatalf("pending t1 tasks, in pages of 1: %v; want 3 in id order", typed)
	}
	for _, state := range []broker.State{active, completed} {
		page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: state, Limit: 100})
		if err != nil || len(page.Tasks) != 1 || page.Tasks[0].State != state {
			t.Fatalf("%s page = %+v, %v", state, page.Tasks, err)
		}
	}
	if page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "nope", Limit: 10}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("listing of an unknown queue = %v, %v", page.Tasks, err)
	}
}

func testListFilters(t *testing.T, b broker.Broker) {
	mk := func(typ, payload string, md map[string]string) string {
		nt := NewTask("q")
		nt.Type, nt.Payload, nt.Metadata = typ, []byte(payload), md
		return EnqueueOne(t, b, T0, nt).ID
	}
	a := mk("email", `{"to":"ada@example.com"}`, nil)
	c := mk("email", `{"to":"bob@example.com"}`, map[string]string{"tenant": "acme"})
	d := mk("sms", `{"to":"+3312"}`, map[string]string{"tenant": "globex"})
	check := func(what string, p broker.ListParams, want ...string) {
		t.Helper()
		p.Queue = "q"
		got := listAll(t, b, p, 1)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: listed %v, want %v", what, got, want)
		}
	}
	check("type", broker.ListParams{Type: "email"}, a, c)
	check("type and state", broker.ListParams{Type: "sms", State: pending}, d)
	check("a type with no task", broker.ListParams{Type: "fax"})
	check("search in the payload", broker.ListParams{Search: "ada@"}, a)
	check("search in metadata", broker.ListParams{Search: "acme"}, c)
	check("search in the id", broker.ListParams{Search: d[len(d)-8:]}, d)
	check("search and type", broker.ListParams{Search: "example.com", Type: "email"}, a, c)
	check("search is case-sensitive", broker.ListParams{Search: "ACME"})

	group := func(name string) string { return EnqueueOne(t, b, T0, grouped("q", name, "digest")).ID }
	g1, g2, g3 := group("daily"), group("daily"), group("weekly")
	check("group", broker.ListParams{Group: "daily"}, g1, g2)
	check("group and state", broker.ListParams{Group: "weekly", State: aggregating}, g3)
	check("group and another type", broker.ListParams{Group: "daily", Type: "email"})
	check("a group with no task", broker.ListParams{Group: "monthly"})
}

// testListStable: tasks enqueued while a listing pages are never returned
// twice, and a task present throughout is never skipped.
func testListStable(t *testing.T, b broker.Broker) {
	var present []string
	for range 20 {
		present = append(present, EnqueueOne(t, b, T0, NewTask("q")).ID)
	}
	p := broker.ListParams{Queue: "q", Limit: 3}
	seen := map[string]bool{}
	for {
		page, err := b.ListTasks(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if seen[task.ID] {
				t.Fatalf("task %s returned twice", task.ID)
			}
			seen[task.ID] = true
		}
		EnqueueOne(t, b, T0, NewTask("q")) // a newer task, mid-listing
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	for _, id := range present {
		if !seen[id] {
			t.Fatalf("task %s, present throughout, was skipped", id)
		}
	}
}

func testListFollows(t *testing.T, b broker.Broker) {
	task := EnqueueOne(t, b, T0, NewTask("q"))
	state := func() broker.State {
		t.Helper()
		page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Limit: 10})
		if err != nil || len(page.Tasks) != 1 {
			t.Fatalf("ListTasks = %v, %v; want the one task", page.Tasks, err)
		}
		return page.Tasks[0].State
	}
	if s := state(); s != pending {
		t.Fatalf("listed as %s, want PENDING", s)
	}
	l := LeaseOne(t, b, "s1", "q", T0)
	if s := state(); s != active {
		t.Fatalf("listed as %s, want ACTIVE", s)
	}
	Fail(t, b, "s1", l, "x", T0, at(time.Minute))
	if s := state(); s != retry {
		t.Fatalf("listed as %s, want RETRY", s)
	}
	actOK(t, b, broker.ActionArchive, T0, task.ID)
	if s := state(); s != archived {
		t.Fatalf("listed as %s, want ARCHIVED", s)
	}
	actOK(t, b, broker.ActionDelete, T0, task.ID)
	if page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Limit: 10}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("a deleted task is still listed: %v, %v", page.Tasks, err)
	}
}

// testListEveryStateWhileMoving: a listing of every state, paged one task
// at a time while tasks move to states listed before and after theirs
// (PENDING to ACTIVE to RETRY and back to PENDING, PENDING to ARCHIVED and
// back), meets every task exactly once, in id order.
func testListEveryStateWhileMoving(t *testing.T, b broker.Broker) {
	var ids []string
	for range 6 {
		ids = append(ids, EnqueueOne(t, b, T0, NewTask("q")).ID)
	}
	moves := []func(){
		func() { actOK(t, b, broker.ActionArchive, T0, ids[5]) },
		func() { actOK(t, b, broker.ActionRun, T0, ids[5]) }, // ARCHIVED, listed after PENDING, back to PENDING
		func() {
			l := LeaseOne(t, b, "s1", "q", T0) // the oldest pending: ids[0], already listed
			Fail(t, b, "s1", l, "x", T0, at(time.Minute))
		},
		func() { actOK(t, b, broker.ActionRun, T0, ids[0]) }, // RETRY to PENDING
		func() { actOK(t, b, broker.ActionArchive, T0, ids[4]) },
	}
	p := broker.ListParams{Queue: "q", Limit: 1}
	var got []string
	for i := 0; ; i++ {
		page, err := b.ListTasks(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		if page.Next == "" {
			break
		}
		if i < len(moves) {
			moves[i]()
		}
		p.Cursor = page.Next
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("listed %v, want each of %v once, in id order", got, ids)
	}
	// A cursor carries its listing's state: another listing refuses it.
	page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("first page = %v, %v", page, err)
	}
	_, err = b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: pending, Cursor: page.Next, Limit: 1})
	requireErrIs(t, "a cursor of every state, in a listing of PENDING", err, broker.ErrInvalidArgument)
}

// testListDescending: a descending listing is the ascending one reversed,
// in every state or one, across pages, whatever the ids producers chose;
// Limit 1 finds the greatest id; a cursor keeps its direction.
func testListDescending(t *testing.T, b broker.Broker) {
	ids := []string{NewID()}
	for i := range 6 {
		nt := NewTask("q")
		nt.Type = fmt.Sprintf("t%d", i%3)
		if i == 2 {
			nt.ID = ulid.MustNew(ulid.Timestamp(T0.Add(time.Hour)), nil).String() // ahead of the clock
		}
		ids = append(ids, EnqueueOne(t, b, T0, nt).ID)
	}
	first := NewTask("q")
	first.ID = ids[0]
	EnqueueOne(t, b, T0, first)
	Succeed(t, b, "s1", LeaseOne(t, b, "s1", "q", T0), T0)
	for _, p := range []broker.ListParams{{Queue: "q"}, {Queue: "q", State: pending}, {Queue: "q", Type: "t1"}} {
		up := listAll(t, b, p, 100)
		p.Descending = true
		for _, size := range []int{1, 2, 100} {
			down := listAll(t, b, p, size)
			slices.Reverse(down)
			if !slices.Equal(down, up) {
				t.Fatalf("%+v in pages of %d, reversed: %v; want the ascending listing %v", p, size, down, up)
			}
		}
	}
	page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Descending: true, Limit: 1})
	if want := slices.Max(ids); err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != want {
		t.Fatalf("descending, Limit 1: %+v, %v; want the greatest id %s", page.Tasks, err, want)
	}
	_, err = b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Cursor: page.Next, Limit: 1})
	requireErrIs(t, "a descending cursor, in an ascending listing", err, broker.ErrInvalidArgument)
}

func testListBadCursor(t *testing.T, b broker.Broker) {
	EnqueueOne(t, b, T0, NewTask("q"))
	for _, c := range []string{"!!!", "AAAA", "not a token"} {
		_, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Cursor: c, Limit: 1})
		requireErrIs(t, "ListTasks with cursor "+c, err, broker.ErrInvalidArgument)
	}
}

func testListRestart(t *testing.T, e *Env) {
	a := EnqueueOne(t, e.B, T0, NewTask("q"))
	c := EnqueueOne(t, e.B, T0, NewTask("q"))
	LeaseOne(t, e.B, "s1", "q", T0) // a, ACTIVE until the restart
	Succeed(t, e.B, "s1", LeaseOne(t, e.B, "s1", "q", T0), T0)
	b := e.Reopen()
	page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: pending, Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != a.ID {
		t.Fatalf("pending after a restart = %v, %v; want the task that was ACTIVE", page.Tasks, err)
	}
	page, err = b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: completed, Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != c.ID {
		t.Fatalf("completed after a restart = %v, %v", page.Tasks, err)
	}
	if page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: active, Limit: 10}); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("ACTIVE after a restart = %v, %v; want none", page.Tasks, err)
	}
}

// testListBrief: a Brief listing leaves out payloads and metadata, so a
// page holds as many tasks as it asks for however large they are (more
// than an engine's answer could carry with them), and a search still
// looks in what it leaves out.
func testListBrief(t *testing.T, b broker.Broker) {
	var want []string
	var payloads [][]byte
	for i := range 6 {
		nt := NewTask("q")
		nt.Payload = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), 1<<20-32))
		payloads = append(payloads, nt.Payload)
		nt.Metadata = map[string]string{"tenant": "acme"}
		want = append(want, EnqueueOne(t, b, T0, nt).ID)
	}
	page, err := b.ListTasks(t.Context(), broker.ListParams{Queue: "q", State: pending, Limit: 10, Brief: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, task := range page.Tasks {
		got = append(got, task.ID)
		if task.Payload != nil || task.Metadata != nil || task.State != pending {
			t.Fatalf("a brief listing gave task %s with %d payload bytes, metadata %v, state %s",
				task.ID, len(task.Payload), task.Metadata, task.State)
		}
	}
	if !slices.Equal(got, want) || page.Next != "" {
		t.Fatalf("a brief page of 10 = %v (next %q), want all of %v", got, page.Next, want)
	}
	page, err = b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Search: `"n":3,`, Limit: 10, Brief: true})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != want[3] {
		t.Fatalf("a brief search in the payloads = %v, %v; want task %s", page.Tasks, err, want[3])
	}
	page, err = b.ListTasks(t.Context(), broker.ListParams{Queue: "q", Limit: 1})
	if err != nil || len(page.Tasks) != 1 || !bytes.Equal(page.Tasks[0].Payload, payloads[0]) || page.Tasks[0].Metadata["tenant"] != "acme" {
		t.Fatalf("a full listing after a brief one = %v, %v; want the first task whole", page.Tasks, err)
	}
}
