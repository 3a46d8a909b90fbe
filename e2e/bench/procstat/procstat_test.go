package procstat

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() {
		t.Errorf("Read(self) = pid %d ppid %d, want %d %d", s.PID, s.PPID, os.Getpid(), os.Getppid())
	}
	if s.RSS <= 0 || s.CPU < 0 {
		t.Errorf("Read(self): RSS %d, CPU %f", s.RSS, s.CPU)
	}
	if args := Cmdline(os.Getpid()); len(args) == 0 || args[0] != os.Args[0] {
		t.Errorf("Cmdline(self) = %q, want it to start with %q", args, os.Args[0])
	}
}

func TestChildrenAndSum(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	children, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(children, cmd.Process.Pid) {
		t.Fatalf("Children(self) = %v, without the sleep started (%d)", children, cmd.Process.Pid)
	}
	totals := Sum([]Group{{Name: "both", PIDs: []int{os.Getpid(), cmd.Process.Pid}}, {Name: "gone", PIDs: []int{1 << 30}}})
	self, _ := Read(os.Getpid())
	if totals["both"].RSS <= self.RSS/2 || totals["gone"] != (Totals{}) {
		t.Errorf("Sum = %+v (self RSS %d)", totals, self.RSS)
	}
}
