package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// migrateCmd applies the PostgreSQL engine's schema migrations, as a
// server does on start (under the same advisory lock), for operators who
// migrate before they roll out: or, with --status, shows where the
// database stands.
type migrateCmd struct {
	DatabaseURL string `name:"database-url" required:"" env:"CONVEYOR_DATABASE_URL" help:"PostgreSQL URL (postgres://user:password@host:port/database)."`
	Status      bool   `help:"Show the migrations applied and pending; change nothing."`
}

func (c *migrateCmd) Run(k *kong.Context) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Status {
		st, err := postgres.Status(ctx, c.DatabaseURL, "")
		if err != nil {
			return err
		}
		var l listing
		for _, m := range st.Known {
			state := "pending"
			if slices.Contains(st.Applied, m.Version) {
				state = "applied"
			}
			l.add(fmt.Sprintf("%04d_%s", m.Version, m.Name), state)
		}
		for _, v := range st.Applied {
			if v > len(st.Known) {
				l.add(fmt.Sprintf("%04d", v), "applied by a newer Conveyor (this binary knows up to "+fmt.Sprint(len(st.Known))+")")
			}
		}
		return l.write(k.Stdout)
	}
	done, err := postgres.Migrate(ctx, c.DatabaseURL, "", slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if len(done) == 0 {
		return writef(k.Stdout, "the database is at schema version %d: nothing to apply\n", postgres.SchemaVersion())
	}
	for _, m := range done {
		if err := writef(k.Stdout, "applied %04d_%s\n", m.Version, m.Name); err != nil {
			return err
		}
	}
	return nil
}
