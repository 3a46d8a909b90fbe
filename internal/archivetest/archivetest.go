package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
)

// File is one entry of a tarball: a regular file, or a symlink to Link.
type File struct {
	Name, Content, Link string
}

// Tarball is a gzipped tarball of files, in their order.
func Tarball(t testing.TB, files ...File) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Content)), Typeflag: tar.TypeReg}
		if f.Link != "" {
			hdr = &tar.Header{Name: f.Name, Linkname: f.Link, Typeflag: tar.TypeSymlink}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if f.Link == "" {
			if _, err := tw.Write([]byte(f.Content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ZerosMember is one gzip member of 1 MiB of zeros, about a KiB: gzip members concatenate, and a
// reader inflates them one after another, so a bomb of any size is a header and copies of it.
func ZerosMember(t testing.TB) []byte {
	t.Helper()
	return member(t, make([]byte, 1<<20))
}

// HeaderMember is one gzip member holding the tar header of a regular file of size bytes: the
// members that follow are its content.
func HeaderMember(t testing.TB, name string, size int64) []byte {
	t.Helper()
	var hdr bytes.Buffer
	// tar writes the header at once; the file's bytes are not its to write here.
	if err := tar.NewWriter(&hdr).WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	return member(t, hdr.Bytes())
}

// ZerosBomb is a gzipped tarball of one file, name, of mib MiB of zeros, about mib KiB: a
// thousand times smaller than what it inflates to. It ends inside the file (no end-of-archive
// blocks): a reader stops at its bound long before.
func ZerosBomb(t testing.TB, name string, mib int) []byte {
	t.Helper()
	zeros := ZerosMember(t)
	bomb := bytes.NewBuffer(HeaderMember(t, name, int64(mib)<<20))
	bomb.Grow(mib * len(zeros))
	for range mib {
		bomb.Write(zeros)
	}
	return bomb.Bytes()
}

func member(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
