package fleet

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ControllerManagerControllers are the kube-controller-manager controllers the fleet runs: the
// garbage collector (ownerReferences cascade, so a deleted resource's PolicyReport goes with it)
// and the namespace controller (a deleted namespace finishes deleting, its objects with it). No
// kubelet runs, so the controllers that manage Pods, Nodes and Services would have nothing to do.
var ControllerManagerControllers = []string{"garbage-collector-controller", "namespace-controller"}

// startControllerManager runs kube-controller-manager against the cluster's apiserver with only
// ControllerManagerControllers, serving nothing (no port to pick) and without leader election.
func (f *Fleet) startControllerManager(binary string, c *Cluster) error {
	c.controllerManager = &process{
		name: "kube-controller-manager " + c.Name,
		path: binary,
		args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--controllers=" + strings.Join(ControllerManagerControllers, ","),
			"--leader-elect=false",
			"--secure-port=0",
			// The garbage collector looks at every resource the apiserver serves; its informers
			// resync rarely, the fleet's objects are few.
			"--concurrent-gc-syncs=5",
		},
		logPath: filepath.Join(f.LogDir, "kube-controller-manager-"+c.Name+".log"),
	}
	if err := c.controllerManager.start(f.launch); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}
