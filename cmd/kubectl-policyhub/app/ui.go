package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/policyhub/policyhub/ui"
	"github.com/policyhub/policyhub/ui/read"
)

func init() { commands = append(commands, newUICommand) }

func newUICommand(o *options) *cobra.Command {
	var address string
	var noBrowser bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the fleet's web view on this machine, with your kubeconfig's rights",
		Long: `ui serves a read-only web view of the fleet: the compliance grid (clusters × policies),
and a page per FleetPolicy, PolicySet, ApplicationPolicy, cluster and application. Pages follow
the hub's changes without a reload.

It reads the hub with your kubeconfig: what you may not list, it does not show (it says so). It
listens on 127.0.0.1 only, and admits only the browser that opens the URL it prints (a one-time
token, traded for a cookie). Stop it with Ctrl-C.`,
		Example: `  kubectl policyhub ui
  kubectl policyhub ui --address 127.0.0.1:8080 --no-browser`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.serveUI(cmd.Context(), address, !noBrowser)
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:0", "Where to listen: a loopback address and port (0: any free port).")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "Print the URL without opening a browser.")
	return cmd
}

func (o *options) serveUI(ctx context.Context, address string, openBrowser bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return usageError{fmt.Errorf("--address %q: %v", address, err)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError{fmt.Errorf("--address %q: the view listens on a loopback address only (127.0.0.1); the hub chart serves it to others, behind the Kubernetes API's authentication", address)}
	}
	cfg, err := o.hubConfig()
	if err != nil {
		return err
	}
	fmt.Fprintln(o.streams.ErrOut, "Reading the hub…")
	reader, err := read.Start(ctx, read.Options{Config: cfg, GatewaySecretNamespace: o.secretNamespace, Namespace: o.namespace(), Log: logr.Discard()})
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", address, err)
	}
	token, err := ui.NewToken()
	if err != nil {
		return err
	}
	server, err := ui.New(reader, ui.Options{Guard: ui.LocalGuard(listener.Addr(), token)})
	if err != nil {
		return err
	}
	httpServer := &http.Server{Handler: server, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	url := fmt.Sprintf("http://%s/?token=%s", listener.Addr(), token)
	fmt.Fprintf(o.streams.Out, "Serving the policyhub view at %s\n", url)
	if scope := reader.Scope(); len(scope.Hidden) > 0 {
		fmt.Fprintf(o.streams.ErrOut, "Warning: you may not list %v on this hub: the view leaves them out.\n", scope.Hidden)
	}
	if openBrowser && !startBrowser(url) {
		fmt.Fprintln(o.streams.ErrOut, "Open that URL in your browser (no browser could be started here).")
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(shutdown)
	}()
	if err := httpServer.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// startBrowser opens url the way the desktop would: $BROWSER, else open (macOS), start
// (Windows), xdg-open (a Linux desktop). It says whether a command started and did not fail at
// once.
func startBrowser(url string) bool {
	var cmds [][]string
	if b := os.Getenv("BROWSER"); b != "" {
		cmds = append(cmds, []string{b})
	}
	switch runtime.GOOS {
	case "darwin":
		cmds = append(cmds, []string{"/usr/bin/open"})
	case "windows":
		cmds = append(cmds, []string{"cmd", "/c", "start"})
	default:
		if os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "" {
			cmds = append(cmds, []string{"xdg-open"})
		}
	}
	for _, args := range cmds {
		cmd := exec.Command(args[0], append(args[1:], url)...)
		if cmd.Start() != nil {
			continue
		}
		// A command that fails within 3 s did not open anything.
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				return true
			}
		case <-time.After(3 * time.Second):
			return true
		}
	}
	return false
}
