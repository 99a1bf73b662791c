package postgres_test

import (
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// schemas remembers the schema of each store, so that a reopen finds it
// and its drop is registered once.
var schemas sync.Map

// openEngine opens an engine on the test database, in the schema of store.
func openEngine(t testing.TB, store string, cfg postgres.Config) *postgres.Engine {
	t.Helper()
	schema, ok := schemas.Load(store)
	if !ok {
		schema = pgtest.Schema(t, store)
		schemas.Store(store, schema)
	}
	cfg.URL, cfg.Schema = pgtest.URL(t), schema.(string)
	e, err := postgres.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestConformance(t *testing.T) {
	bt.Run(t, func(t testing.TB, store string, n broker.Notifier) broker.Broker {
		return openEngine(t, store, postgres.Config{Notifier: n, MaxConns: 4})
	})
}
