package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// releaseCmd groups the commands on worker releases (Hello.release_id).
type releaseCmd struct {
	Ls    releaseLsCmd    `cmd:"" help:"List the worker releases seen, the newest first: new work goes to the newest with room."`
	Drain releaseDrainCmd `cmd:"" help:"Send a release's workers no new work (they finish what they hold)."`
}

// releaseLsCmd is `conveyor release ls`.
type releaseLsCmd struct {
	clientFlags
}

// Run lists the releases, the newest first.
func (c *releaseLsCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ListReleases(ctx, connect.NewRequest(&conveyorv1.ListReleasesRequest{}))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONList(k.Stdout, res.Msg.GetReleases())
	}
	if len(res.Msg.GetReleases()) == 0 {
		return writef(k.Stdout, "no worker releases seen\n")
	}
	t := newTable(k.Stdout, "RELEASE", "FIRST SEEN", "DRAINING", "SESSIONS")
	for _, r := range res.Msg.GetReleases() {
		t.row(r.GetReleaseId(), showAgo(r.GetFirstSeenAt()), yesNo(r.GetDraining()), fmt.Sprint(r.GetSessions()))
	}
	return t.flush()
}

// releaseDrainCmd is `conveyor release drain ID`.
type releaseDrainCmd struct {
	clientFlags

	Release string `arg:"" complete:"release" help:"Release id (as the workers' CONVEYOR_RELEASE_ID or release option)."`
}

// Run drains the release: once it returns, its sessions are sent no new
// work, nor are later sessions of it.
func (c *releaseDrainCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	if _, err := cn.admin.DrainRelease(ctx, connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: c.Release})); err != nil {
		return err
	}
	_, err = fmt.Fprintf(k.Stdout, "release %s drained: its workers get no new work\n", c.Release)
	return err
}
