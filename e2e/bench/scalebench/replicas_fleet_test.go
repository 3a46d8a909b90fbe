package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lines client-go's leader election writes (JSON, as the hub logs them) are counted for the
// sync Lease only: the replicas' own Leases in the hub are another story.
func TestLeaseTrouble(t *testing.T) {
	lines := []string{
		`{"level":"error","msg":"Failed to update lease optimistically, falling back to slow path","cluster":"rc-1","lock":"policyhub-system/policyhub-sync","error":"Operation cannot be fulfilled"}`,
		`{"level":"error","msg":"Failed to update lease","cluster":"rc-2","lock":"policyhub-system/policyhub-sync","error":"Put \"https://hub/...\": context canceled"}`,
		`{"level":"error","msg":"Error initially creating lease lock","cluster":"rc-3","lock":"policyhub-system/policyhub-sync","error":"already exists"}`,
		`{"level":"error","msg":"Failed to update lock","cluster":"rc-3","lock":"policyhub-system/policyhub-sync","error":"Operation cannot be fulfilled on leases.coordination.k8s.io"}`,
		`{"level":"info","msg":"Failed to renew lease","cluster":"rc-4","lock":"policyhub-system/policyhub-sync"}`,
		`{"level":"info","msg":"Failed to renew lease","lock":"vela-system/policyhub-replica.bench-rep.replica-0"}`,
		`{"level":"error","msg":"Failed to update lease","lock":"vela-system/policyhub-replica.bench-rep.replica-0"}`,
		`{"level":"info","msg":"Successfully acquired lease","cluster":"rc-5","lock":"policyhub-system/policyhub-sync"}`,
		`{"level":"info","msg":"applied 1, updated 0","cluster":"rc-5"}`,
		strings.Repeat("x", 200_000) + " policyhub-system/policyhub-sync Failed to renew lease", // a long line still counts
	}
	path := filepath.Join(t.TempDir(), "hub.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := leaseTrouble(path), (lockTrouble{conflicts: 3, writesFailed: 4, renewFailed: 2}); got != want {
		t.Errorf("leaseTrouble = %+v, want %+v", got, want)
	}
	if got := leaseTrouble(filepath.Join(t.TempDir(), "missing.log")); got != (lockTrouble{}) {
		t.Errorf("a missing log: %+v, want nothing", got)
	}
}

func TestOptionalBoolFlag(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		def, want bool
		wantErr   bool
	}{
		{args: nil, def: true, want: true},
		{args: nil, def: false, want: false},
		{args: []string{"-x"}, def: false, want: true},
		{args: []string{"-x=false"}, def: true, want: false},
		{args: []string{"-x=true"}, def: false, want: true},
		{args: []string{"-x=maybe"}, wantErr: true},
	} {
		var v optionalBool
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		fs.Var(&v, "x", "")
		err := fs.Parse(tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: err %v, want an error: %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && v.or(tc.def) != tc.want {
			t.Errorf("%v with default %v: %v, want %v", tc.args, tc.def, v.or(tc.def), tc.want)
		}
	}
}
