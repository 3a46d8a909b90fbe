// Package e2e holds the tests that run on a local fleet (see e2e/fleet): real kube-apiservers, a
// real cluster-gateway and real Kyverno. The tests of this package share one fleet, started in
// TestMain. The wrapper modules that build the fleet's binaries live in e2e/testbin.
package e2e
