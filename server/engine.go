package server

import (
	"log/slog"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
)

// DataFile is the name of the bbolt file inside Config.DataDir.
const DataFile = "conveyor.db"

// OpenBolt returns a Config.OpenBroker that opens the embedded bbolt engine
// on the file at path. This is the one place the server names an engine.
func OpenBolt(path string) func(n broker.Notifier, log *slog.Logger) (broker.Broker, error) {
	return func(n broker.Notifier, log *slog.Logger) (broker.Broker, error) {
		return bolt.Open(bolt.Config{Path: path, Notifier: n, Logger: log})
	}
}
