// Command plait is Plait in one binary: host agent, embedded P4 switch, controller, labs,
// the model and the operator verbs. The commands live in cmd/plait/cli; README.md lists
// them and docs/ describes each component.
package main

import (
	"os"

	"github.com/plait/plait/cmd/plait/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
