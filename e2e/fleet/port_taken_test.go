package fleet

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An apiserver whose port another process took between the fleet choosing it and the apiserver
// binding it ("address already in use") is started again on another port, and the fleet starts.
func TestAPIServerMovesOffATakenPort(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	var once sync.Once
	pick := func() (int, error) {
		port := 0
		once.Do(func() { port = takenPort }) // the first apiserver's (the hub's) is taken
		if port != 0 {
			return port, nil
		}
		return freePort()
	}
	f := startTestFleet(t, Options{Managed: []ManagedCluster{{Name: "cluster-1"}}, pickPort: pick})
	if strings.HasSuffix(f.Hub.URL, ":"+strconv.Itoa(takenPort)) {
		t.Fatalf("the hub serves on the taken port %d", takenPort)
	}
	log, err := os.ReadFile(filepath.Join(f.LogDir, "kube-apiserver-hub.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "address already in use") {
		t.Errorf("the hub's log does not show the first start failing on the taken port")
	}
	// The fleet works on the new port (Start also waited for the gateway through the hub).
	if _, err := kubernetesClient(t, f.Hub.Config).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the hub on its new port: %v", err)
	}
}
