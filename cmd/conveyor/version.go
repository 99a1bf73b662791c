package main

import (
	"fmt"

	"github.com/conveyor-dev/conveyor/internal/buildinfo"
)

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println(buildinfo.Version)
	return nil
}
