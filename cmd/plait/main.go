// Command plait stripes one flow across several network paths: host agent, embedded P4
// switch, controller, labs and the operator verbs, in one binary.
package main

import (
	"os"

	"github.com/plait/plait/cmd/plait/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
