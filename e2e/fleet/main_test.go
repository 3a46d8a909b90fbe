package fleet

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("fleet: -short given: the tests that start fleets do not run")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
