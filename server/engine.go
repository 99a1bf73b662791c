package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// DataFile is the name of the bbolt file inside Config.DataDir.
const DataFile = "conveyor.db"

// BrokerOptions is what the server hands the engine it opens.
type BrokerOptions struct {
	// Notifier receives the engine's signals.
	Notifier broker.Notifier
	// Logger receives the engine's logs.
	Logger *slog.Logger
	// GroupDefaults is the group policy of queues that set none.
	GroupDefaults broker.GroupPolicy
	// OnCommit, for an engine that batches its writes, is told of each
	// commit (for the commit metrics); it must return quickly.
	OnCommit func(broker.Commit)
	// NodeAddress, NodeVersion and NodeLiveness describe this node, for an
	// engine several nodes share (Config.AdvertiseAddress, Version,
	// NodeLiveness).
	NodeAddress, NodeVersion string
	NodeLiveness             time.Duration
}

// OpenBolt returns a Config.OpenBroker that opens the embedded bbolt engine
// on the file at path. This file is the one place the server names an
// engine.
func OpenBolt(path string) func(BrokerOptions) (broker.Broker, error) {
	return func(o BrokerOptions) (broker.Broker, error) {
		return bolt.Open(bolt.Config{Path: path, Notifier: o.Notifier, Logger: o.Logger, GroupDefaults: o.GroupDefaults, OnCommit: o.OnCommit})
	}
}

// OpenPostgres returns a Config.OpenBroker that opens the PostgreSQL
// engine on the database at url (in schema, when not empty), migrating
// its schema first, with a pool of at most maxConns connections (0: the
// engine's default).
func OpenPostgres(url, schema string, maxConns int32) func(BrokerOptions) (broker.Broker, error) {
	return func(o BrokerOptions) (broker.Broker, error) {
		ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
		defer cancel()
		return postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: maxConns, Notifier: o.Notifier,
			Logger: o.Logger, GroupDefaults: o.GroupDefaults,
			NodeAddress: o.NodeAddress, NodeVersion: o.NodeVersion, Liveness: o.NodeLiveness})
	}
}

// postgresOpenTimeout bounds connecting to the database and migrating it
// at start.
const postgresOpenTimeout = time.Minute
