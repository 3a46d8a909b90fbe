// Command kubectl-policyhub is policyhub's kubectl plugin (`kubectl policyhub ...`): the fleet's
// clusters, the declarations' status, an application's results, a dry-run of the hub's sync, and
// a pre-deploy check of manifests against a cluster's Kyverno.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

func main() {
	// The hub's packages the plugin reuses log through controller-runtime; the plugin reports
	// through its own output only.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], app.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
