package conveyortest_test

import (
	"context"
	"errors"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyortest"
	"github.com/conveyor-dev/conveyor/server"
)

func TestStartWithToken(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t, conveyortest.WithConfig(func(c *server.Config) { c.Token = "secret" }))

	// A client without the token is refused; the Server's carry it.
	bare, err := conveyor.NewClient(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Enqueue(context.Background(), "t", nil); !errors.Is(err, conveyor.ErrUnauthenticated) {
		t.Fatalf("Enqueue without the token: %v, want ErrUnauthenticated", err)
	}
	enqueue(t, s.Client(), "t", `{}`)
	w := s.NewWorker()
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	conveyortest.DrainOnce(context.Background(), t, s, w)
	conveyortest.RequireEnqueued(t, s, conveyortest.Want{Type: "t", State: conveyor.TaskStateCompleted})
}

func TestStartRefusesTLS(t *testing.T) {
	t.Parallel()
	msg := failure(t, func(tb testing.TB) {
		conveyortest.Start(tb, conveyortest.WithConfig(func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = "c", "k" }))
	})
	contains(t, "the failure", msg, "does not serve TLS")
}

func TestStartServersAreSeparate(t *testing.T) {
	t.Parallel()
	a, b := conveyortest.Start(t), conveyortest.Start(t)
	if a.URL() == b.URL() {
		t.Fatalf("two servers share %s", a.URL())
	}
	enqueue(t, a.Client(), "t", `{}`)
	conveyortest.RequireEnqueued(t, a, conveyortest.Want{Type: "t"})
	conveyortest.RequireNotEnqueued(t, b, conveyortest.Want{})
}
