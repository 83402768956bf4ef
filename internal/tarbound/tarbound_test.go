package tarbound_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"afe.dev/sandbox/internal/tarbound"
	"afe.dev/sandbox/test/tartest"
)

// plain is a tar of regular files of the given sizes.
func plain(t *testing.T, sizes ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, n := range sizes {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// many is n empty files.
func many(t *testing.T, n int) []byte {
	return plain(t, make([]int, n)...)
}

// The crafted sparse tars are what the bound defends against: archive/tar
// reads each back as a regular file of its real size.
func TestCraftedSparseTarsExpand(t *testing.T) {
	const realSize = 64 << 20
	for name, data := range map[string][]byte{
		"PAX 1.0": tartest.SparsePAX("big.bin", realSize, bytes.Repeat([]byte{'a'}, 3000)),
		"PAX 0.1": tartest.SparsePAXMap("big.bin", realSize, bytes.Repeat([]byte{'a'}, 3000)),
		"GNU S":   tartest.SparseGNU("big.bin", realSize, bytes.Repeat([]byte{'a'}, 3000)),
	} {
		tr := tar.NewReader(bytes.NewReader(data))
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if hdr.Name != "big.bin" || hdr.Size != realSize {
			t.Fatalf("%s: read as %q of %d bytes", name, hdr.Name, hdr.Size)
		}
		n, err := io.Copy(io.Discard, tr)
		if err != nil || n != realSize {
			t.Fatalf("%s: %d bytes read from a tar of %d: %v", name, n, len(data), err)
		}
		if _, err := tr.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: after the entry: %v", name, err)
		}
	}
}

func TestBound(t *testing.T) {
	const max = 64 << 10
	for name, tc := range map[string]struct {
		tar     []byte
		max     int64
		wantErr error
		// entries that pass before the refusal
		entries int64
	}{
		"a plain tar within the bound": {tar: plain(t, 1000, 20000, 0), max: max, entries: 3},
		"exactly the bound":            {tar: plain(t, max-tarbound.BlockSize), max: max, entries: 1},
		"a PAX sparse entry (1.0) of 1.5 GiB in a tar of a few KiB": {
			tar: tartest.SparsePAX("big.bin", 1610612736, bytes.Repeat([]byte{'a'}, 3000)), max: max, wantErr: tarbound.ErrSparse,
		},
		"a PAX sparse entry (0.1)":    {tar: tartest.SparsePAXMap("big.bin", 1610612736, []byte("a")), max: max, wantErr: tarbound.ErrSparse},
		"a GNU sparse entry (type S)": {tar: tartest.SparseGNU("big.bin", 1610612736, []byte("a")), max: max, wantErr: tarbound.ErrSparse},
		"a sparse entry, with no size bound": {
			tar: tartest.SparsePAX("big.bin", 8<<20, []byte("a")), max: 0, wantErr: tarbound.ErrSparse,
		},
		"a sparse entry after plain ones": {
			tar:     append(plain(t, 10)[:2*tarbound.BlockSize], tartest.SparseGNU("big.bin", 1<<40, []byte("a"))...),
			max:     max,
			wantErr: tarbound.ErrSparse, entries: 1,
		},
		"one entry over the bound":                 {tar: plain(t, max), max: max, wantErr: tarbound.ErrTooLarge},
		"sizes that sum over the bound":            {tar: plain(t, 30000, 30000, 30000), max: max, wantErr: tarbound.ErrTooLarge, entries: 2},
		"many small entries within the bound":      {tar: many(t, 100), max: max, entries: 100},
		"many empty entries whose headers pass it": {tar: many(t, 5000), max: max, wantErr: tarbound.ErrTooLarge, entries: max / tarbound.BlockSize},
		"not a tar": {tar: bytes.Repeat([]byte{'z'}, 1024), max: max, wantErr: errors.New("any")},
	} {
		t.Run(name, func(t *testing.T) {
			for fn, run := range map[string]func(w io.Writer, r io.Reader, b *tarbound.Bound) (int64, error){
				"Pass": tarbound.Pass,
				"Copy": func(w io.Writer, r io.Reader, b *tarbound.Bound) (int64, error) {
					return tarbound.Copy(w, r, b, nil)
				},
			} {
				var out bytes.Buffer
				b := &tarbound.Bound{Max: tc.max}
				n, err := run(&out, bytes.NewReader(tc.tar), b)
				switch {
				case tc.wantErr == nil && err != nil:
					t.Fatalf("%s: %v", fn, err)
				case tc.wantErr != nil && err == nil:
					t.Fatalf("%s: passed, want %v", fn, tc.wantErr)
				case tc.wantErr != nil && tc.wantErr.Error() != "any" && !errors.Is(err, tc.wantErr):
					t.Fatalf("%s: %v, want %v", fn, err, tc.wantErr)
				}
				if b.Entries != tc.entries {
					t.Errorf("%s: %d entries passed, want %d", fn, b.Entries, tc.entries)
				}
				// Never more written than the bound (and the end blocks of
				// a re-encoded tar), nor a byte of a refused entry.
				if tc.max > 0 && int64(out.Len()) > tc.max+2*tarbound.BlockSize {
					t.Errorf("%s: %d bytes written, over the bound of %d", fn, out.Len(), tc.max)
				}
				if int64(out.Len()) > int64(len(tc.tar)) {
					t.Errorf("%s: %d bytes written from a tar of %d", fn, out.Len(), len(tc.tar))
				}
				if tc.wantErr == nil {
					if n != int64(len(tc.tar)) {
						t.Errorf("%s: read %d bytes of %d", fn, n, len(tc.tar))
					}
					if fn == "Pass" && !bytes.Equal(out.Bytes(), tc.tar) {
						t.Errorf("Pass changed the tar")
					}
					// What was written reads back as the same entries.
					if _, err := tarbound.Scan(bytes.NewReader(out.Bytes()), &tarbound.Bound{Max: tc.max}); err != nil {
						t.Errorf("%s: the copy does not read back: %v", fn, err)
					}
				}
			}
		})
	}
}

func TestLimitWriter(t *testing.T) {
	var out bytes.Buffer
	w := tarbound.LimitWriter(&out, 10)
	if _, err := w.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("123456")); !errors.Is(err, tarbound.ErrTooLarge) {
		t.Fatalf("a write past the bound: %v", err)
	}
	if out.String() != "12345" {
		t.Fatalf("written: %q", out.String())
	}
}
