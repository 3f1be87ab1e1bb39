// Command kube-reclaim runs one kube-reclaim role per subcommand.
package main

import (
	"os"

	"github.com/kube-reclaim/kube-reclaim/cmd/kube-reclaim/app"
)

func main() { os.Exit(app.Main()) }
