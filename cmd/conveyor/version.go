package main

import (
	"fmt"

	"github.com/conveyor-dev/conveyor/server"
)

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println(server.Version)
	return nil
}
