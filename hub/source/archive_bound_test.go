package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/policyhub/policyhub/internal/archivetest"
)

// countingReader counts the compressed bytes a read took.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A bomb — a file the reader skips (not YAML), 1 GiB of zeros in 1 MiB of gzip — is refused
// after inflating about the bound, not the gigabyte: the compressed bytes it consumed say how far
// it inflated, since each member is 1 MiB of zeros.
func TestReadArchiveStopsABombAtTheInflatedBound(t *testing.T) {
	const member = 1 << 20
	limits := Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20} // bound: 4 MiB
	zeros := archivetest.ZerosMember(t)
	for _, name := range []string{"clusters/staging/blob.bin", "elsewhere/blob.bin"} {
		t.Run(name, func(t *testing.T) {
			bomb := archivetest.ZerosBomb(t, name, 1024) // 1 GiB inflated
			total := int64(len(bomb))
			in := &countingReader{r: bytes.NewReader(bomb)}
			start := time.Now()
			art, err := readArchive(context.Background(), in, "clusters/staging/", limits)
			took := time.Since(start)
			if err == nil || art != nil {
				t.Fatalf("a bomb was read: %v %v", art, err)
			}
			if want := "inflates to more than 4194304 bytes"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want one naming the bound (%q)", err, want)
			}
			// The bound is 4 members; gzip reads ahead a little.
			inflated := in.n / int64(len(zeros)) * member
			if limit := 2 * maxInflatedBytes(limits); inflated > limit {
				t.Errorf("read %d of %d compressed bytes, about %d inflated: want it stopped near the bound %d", in.n, total, inflated, maxInflatedBytes(limits))
			}
			t.Logf("stopped after %d of %d compressed bytes (about %d MiB of 1024 inflated) in %s", in.n, total, inflated>>20, took)
		})
	}
	// The defaults' bound holds every archive within MaxTotalBytes, with room.
	if got := maxInflatedBytes(DefaultLimits); got != 64<<20 {
		t.Errorf("default inflated bound %d, want 64 MiB", got)
	}
}

// Under the bound, a read is unchanged: the bound counts bytes, it does not refuse big archives
// of small policies.
func TestReadArchiveUnderTheBound(t *testing.T) {
	limits := Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 20}
	data := tarball(t,
		file{name: "p/a.yaml", content: clusterPolicy("a").yaml},
		file{name: "docs/big.bin", content: strings.Repeat("x", 3<<20)}, // skipped, 3 of the 4 MiB
	)
	art, err := readArchive(context.Background(), bytes.NewReader(data), "p/", limits)
	if err != nil || len(art.Policies) != 1 {
		t.Fatalf("read %v, %v: want the one policy", art, err)
	}
}

// endlessZeros is a gzip stream of zeros that never ends: members written until the reader stops.
func endlessZeros(t *testing.T) io.Reader {
	t.Helper()
	zeros := archivetest.ZerosMember(t)
	header := archivetest.HeaderMember(t, "blob.bin", 1<<40)
	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write(header); err != nil {
			return
		}
		for {
			if _, err := pw.Write(zeros); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = pr.Close() })
	return pr
}

// cancelAfter cancels a context once the read took n compressed bytes: a read stopped midway.
type cancelAfter struct {
	countingReader
	n         int64
	cancel    func()
	at        time.Time
	cancelled int64
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.countingReader.Read(p)
	if c.at.IsZero() && c.countingReader.n >= c.n {
		c.at, c.cancelled = time.Now(), c.countingReader.n
		c.cancel()
	}
	return n, err
}

// A read whose context is done stops promptly, however much is left to inflate: cancelled
// midway, or done before it starts.
func TestReadArchiveStopsWithItsContext(t *testing.T) {
	huge := Limits{MaxPolicies: 10, MaxPolicyBytes: 1 << 20, MaxTotalBytes: 1 << 40} // bound: 4 TiB
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := int64(len(archivetest.ZerosMember(t)))
	in := &cancelAfter{countingReader: countingReader{r: endlessZeros(t)}, n: 64 * member, cancel: cancel} // 64 MiB inflated
	done := make(chan error, 1)
	go func() {
		_, err := readArchive(ctx, in, "", huge)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second): // the endless stream ends with the test
		t.Fatal("the read did not stop 10s after it started (cancelled after 64 MiB)")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
	if in.at.IsZero() {
		t.Fatal("the read ended before it was cancelled")
	}
	// After the cancel it inflates what gzip already holds, at most a member or two.
	if after, took := in.countingReader.n-in.cancelled, time.Since(in.at); after > 4*member || took > time.Second {
		t.Errorf("after its context was cancelled the read took %d more compressed bytes (%d a member) and %s", after, member, took)
	}

	already := &countingReader{r: endlessZeros(t)}
	if _, err := readArchive(ctx, already, "", huge); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read with a done context: %v", err)
	}
	// gzip reads its header before the first inflated byte is asked for; nothing more.
	if already.n > 64<<10 {
		t.Errorf("a read with a done context took %d compressed bytes", already.n)
	}
}

// A policy bundle whose content layer is a bomb (2 GiB of zeros in 2 MiB, well inside the 16 MiB
// a bundle may be) is refused at the bound, through the registry as the hub reads it.
func TestPullOCIRefusesABombBundle(t *testing.T) {
	host := testRegistry(t)
	bomb := archivetest.ZerosBomb(t, "pss/zeros.yaml.bin", 2048)
	pushBundle(t, host, "bundles/bomb:1.0.0", bundleIndex("1.0.0"), bomb)
	start := time.Now()
	_, err := PullOCI(context.Background(), host+"/bundles/bomb:1.0.0", testKeychain, DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), "inflates to more than 67108864 bytes") {
		t.Fatalf("a bomb bundle: %v", err)
	}
	t.Logf("refused in %s: %v", time.Since(start), err)
}

// FuzzReadArchive: whatever the bytes, a read never panics, and what it returns is within the
// limits.
func FuzzReadArchive(f *testing.F) {
	f.Add(tarball(f, file{name: "p/a.yaml", content: clusterPolicy("a").yaml}, file{name: "p/b.bin", content: "x"}))
	f.Add(archivetest.ZerosBomb(f, "p/zeros.yaml", 8))
	f.Add(archivetest.ZerosBomb(f, "p/zeros.bin", 8))
	limits := Limits{MaxPolicies: 3, MaxPolicyBytes: 64 << 10, MaxTotalBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		art, err := readArchive(context.Background(), bytes.NewReader(data), "p/", limits)
		if err != nil {
			return
		}
		if len(art.Policies) > limits.MaxPolicies {
			t.Fatalf("%d policies, over %d", len(art.Policies), limits.MaxPolicies)
		}
	})
}
