// Package ui serves policyhub's read-only web view of the fleet: the compliance grid, and a page
// per declaration, cluster and application, each a URL that can be shared. Pages are HTML rendered
// on the server from the hub's state as read.Reader holds it (no request to the hub per view);
// a small embedded script follows the hub's changes (Server-Sent Events) and refreshes the part
// of the page that changed. Nothing is fetched from elsewhere: it works air-gapped.
//
// `kubectl policyhub ui` serves it on 127.0.0.1 with the user's kubeconfig, behind a one-time
// token; the hub serves it behind the Kubernetes API's authentication and authorization.
package ui
