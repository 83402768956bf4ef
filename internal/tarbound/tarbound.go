// Package tarbound bounds what a tar made by a tenant or a workload writes
// once extracted. The bytes of a tar do not bound that: archive/tar hands
// a sparse entry (GNU type 'S', or GNU.sparse.* PAX records) back as a
// regular file of its real size, its holes read as zeros, so a tar of a few
// KiB can extract to GiBs. A Bound refuses sparse entries (nothing the
// project makes or serves holds one: the engine's archives and the
// clients' tars are plain) and counts every entry as a plain tar holds it,
// before anything of the entry is written.
package tarbound

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrSparse is the error of a sparse entry.
var ErrSparse = errors.New("sparse tar entries are refused")

// ErrTooLarge is the error of a tar past its bound.
var ErrTooLarge = errors.New("the tar is larger than its bound")

// ErrNotTar is the error of a stream that does not read as a tar.
var ErrNotTar = errors.New("not a tar")

// BlockSize is the size of a tar block: a header takes one, an entry's
// data is padded to whole blocks.
const BlockSize = 512

// Bound checks a tar's entries one by one, as they are read.
type Bound struct {
	// Max is the most the entries may take, each counted as a plain tar
	// holds it: a header block and its data (its real size) padded to
	// blocks. 0 or less bounds no size; sparse entries are refused still.
	Max int64
	// Bytes is what the entries checked so far take, Data the sum of
	// their data (what extracting them writes); Entries counts them.
	Bytes, Data int64
	Entries     int64
}

// Check counts the entry, or refuses it: ErrSparse for a sparse entry,
// ErrTooLarge when it takes the tar past Max. Call it before writing
// anything of the entry.
func (b *Bound) Check(hdr *tar.Header) error {
	if Sparse(hdr) {
		return fmt.Errorf("tar entry %q is sparse: %w", hdr.Name, ErrSparse)
	}
	size := int64(0)
	if hasData(hdr.Typeflag) {
		if hdr.Size < 0 {
			return fmt.Errorf("tar entry %q has a negative size", hdr.Name)
		}
		size = hdr.Size
	}
	cost := BlockSize + (size+BlockSize-1)/BlockSize*BlockSize
	if size > 0 && cost < size { // an overflow
		cost = size
	}
	if b.Max > 0 && (cost > b.Max || b.Bytes > b.Max-cost) {
		return fmt.Errorf("tar entry %q (%d bytes) takes the tar past %d bytes: %w", hdr.Name, size, b.Max, ErrTooLarge)
	}
	b.Bytes += cost
	b.Data += size
	b.Entries++
	return nil
}

// Sparse is true for the header of a sparse file: GNU's type 'S', or any
// GNU.sparse.* PAX record (formats 0.0, 0.1 and 1.0, which archive/tar
// expands to the real size).
func Sparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// hasData is false for the types whose entries hold no data whatever
// their size says (archive/tar reads none for them).
func hasData(flag byte) bool {
	switch flag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return false
	}
	return true
}

// LimitWriter is a writer that passes at most n bytes on to w; a write
// past them writes nothing more and fails with ErrTooLarge.
func LimitWriter(w io.Writer, n int64) io.Writer {
	return &limitWriter{w: w, left: n, max: n}
}

type limitWriter struct {
	w         io.Writer
	left, max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, fmt.Errorf("more than %d bytes written: %w", l.max, ErrTooLarge)
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

// Copy copies the tar from r to w, entry by entry, each checked by b
// before anything of it is written to w, and returns the bytes read from
// r. Headers go through as read (owners, modes, times, links kept);
// rewrite, when not nil, changes each one first. On an error, what was
// written to w ends before the refused entry.
func Copy(w io.Writer, r io.Reader, b *Bound, rewrite func(*tar.Header) (*tar.Header, error)) (int64, error) {
	in := &countingReader{r: r}
	tr := tar.NewReader(in)
	tw := tar.NewWriter(w)
	err := eachEntry(tr, b, func(hdr *tar.Header) error {
		var err error
		if rewrite != nil {
			if hdr, err = rewrite(hdr); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hasData(hdr.Typeflag) {
			// The reader stops at the entry's size: the bound holds for
			// what is copied, whatever the header claimed.
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return in.n, err
	}
	if err := tw.Close(); err != nil {
		return in.n, err
	}
	// What follows the end of the archive (the end blocks, the engine's
	// padding) is read, not copied, so the count is the whole stream.
	_, err = io.Copy(io.Discard, in)
	return in.n, err
}

// eachEntry reads the headers of tr to the end of the archive and calls
// entry with each once b has checked it; it stops at the first error.
func eachEntry(tr *tar.Reader, b *Bound, entry func(*tar.Header) error) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotTar, err)
		}
		if err := b.Check(hdr); err != nil {
			return err
		}
		if err := entry(hdr); err != nil {
			return err
		}
	}
}

// Pass copies the tar from r to w as it is, byte for byte, and returns
// the bytes read from r: each entry's header reaches w only once b has
// checked it, so on an error what reached w ends before the refused
// entry. What follows the end of the archive goes through too.
func Pass(w io.Writer, r io.Reader, b *Bound) (int64, error) {
	in := &recordingReader{r: r}
	tr := tar.NewReader(in)
	buf := make([]byte, 32<<10)
	err := eachEntry(tr, b, func(hdr *tar.Header) error {
		if err := in.flush(w); err != nil {
			return err
		}
		// The entry's data, a piece at a time (what the reader reads for
		// one Read is at most buf's length).
		for {
			_, err := tr.Read(buf)
			if ferr := in.flush(w); ferr != nil {
				return ferr
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%w: tar entry %q: %w", ErrNotTar, hdr.Name, err)
			}
		}
	})
	if err != nil {
		return in.n, err
	}
	if err := in.flush(w); err != nil {
		return in.n, err
	}
	n, err := io.CopyBuffer(w, r, buf)
	return in.n + n, err
}

// Scan reads the whole tar, each entry checked by b, and returns the
// bytes read.
func Scan(r io.Reader, b *Bound) (int64, error) {
	return Pass(io.Discard, r, b)
}

// recordingReader keeps what is read through it until flush.
type recordingReader struct {
	r    io.Reader
	n    int64
	kept []byte
}

func (c *recordingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.kept = append(c.kept, p[:n]...)
	return n, err
}

// flush writes what was read since the last flush.
func (c *recordingReader) flush(w io.Writer) error {
	if len(c.kept) == 0 {
		return nil
	}
	_, err := w.Write(c.kept)
	c.kept = c.kept[:0]
	return err
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
