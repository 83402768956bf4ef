package runlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestWriterBound(t *testing.T) {
	tests := map[string]struct {
		max    int64
		writes []string
		want   string
	}{
		"under the bound":     {max: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		"exactly the bound":   {max: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		"cut within a write":  {max: 4, writes: []string{"abc", "def"}, want: "abcd" + Marker(4)},
		"nothing after a cut": {max: 3, writes: []string{"abc", "d", "efgh"}, want: "abc" + Marker(3)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir(), Max: tc.max}
			w, err := s.Create("uid-1", 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.writes {
				if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
					t.Fatalf("Write(%q) = %d, %v: the command's output must never fail", p, n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := s.Copy(context.Background(), &got, nil, "uid-1", 1, true, nil); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got.String()); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// The bound is the Run's: a later attempt gets what the earlier ones left.
func TestWriterBoundIsPerRun(t *testing.T) {
	s := &Store{Dir: t.TempDir(), Max: 10}
	write := func(attempt int32, out string) string {
		t.Helper()
		w, err := s.Create("uid-run", attempt)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(out))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := s.Copy(context.Background(), &got, nil, "uid-run", attempt, false, nil); err != nil {
			t.Fatal(err)
		}
		return got.String()
	}
	if got := write(1, "abcdef"); got != "abcdef" {
		t.Fatalf("attempt 1: %q", got)
	}
	if got, want := write(2, "ghijkl"), "ghij"+Marker(10); got != want {
		t.Fatalf("attempt 2: %q, want %q", got, want)
	}
	if got, want := write(3, "m"), Marker(10); got != want {
		t.Fatalf("attempt 3 after the Run's bound: %q, want %q", got, want)
	}
}

func TestLatestAndFollow(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if _, err := s.Latest("uid-2"); !errors.Is(err, ErrNoLog) {
		t.Fatalf("Latest of a Run without log: %v, want ErrNoLog", err)
	}
	for _, a := range []int32{1, 2} {
		w, err := s.Create("uid-2", a)
		if err != nil {
			t.Fatal(err)
		}
		if a == 1 {
			_ = w.Close()
			continue
		}
		// Attempt 2 is still being written while it is followed.
		_, _ = w.Write([]byte("first\n"))
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = w.Write([]byte("second\n"))
			_ = w.Close()
		}()
	}
	latest, err := s.Latest("uid-2")
	if err != nil || latest != 2 {
		t.Fatalf("Latest = %d, %v; want 2", latest, err)
	}
	var got bytes.Buffer
	if err := s.Copy(context.Background(), &got, nil, "uid-2", 2, true, nil); err != nil {
		t.Fatal(err)
	}
	if got.String() != "first\nsecond\n" {
		t.Fatalf("followed %q", got.String())
	}
	for _, bad := range []string{"", "../x", "a/b", "."} {
		if _, err := s.Create(typesUID(bad), 1); err == nil {
			t.Fatalf("Create accepted the UID %q", bad)
		}
	}
	entries, _ := os.ReadDir(s.Dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "..") {
			t.Fatalf("a folder left the store: %s", filepath.Join(s.Dir, e.Name()))
		}
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// A followed attempt ends when a later attempt of the Run has a log, or
// when over says so, though its end was never written (the manager that
// ran it was killed); what it holds is copied whole either way.
func TestFollowEndsWhenTheAttemptIsOver(t *testing.T) {
	tests := map[string]struct {
		// end is what happens, a while after the reader began, instead
		// of the attempt's end being written.
		end  func(s *Store, over *atomic.Bool)
		over bool
	}{
		"a later attempt begins": {end: func(s *Store, _ *atomic.Bool) {
			if w, err := s.Create("uid-3", 2); err == nil {
				_ = w.Close()
			}
		}},
		"the Run says it is over": {end: func(_ *Store, over *atomic.Bool) { over.Store(true) }, over: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir()}
			w, err := s.Create("uid-3", 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Close() })
			_, _ = w.Write([]byte("before\n"))
			var over atomic.Bool
			go func() {
				time.Sleep(300 * time.Millisecond)
				_, _ = w.Write([]byte("last words\n"))
				tc.end(s, &over)
			}()
			var overFunc func() bool
			if tc.over {
				overFunc = over.Load
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got bytes.Buffer
			if err := s.Copy(ctx, &got, nil, "uid-3", 1, true, overFunc); err != nil {
				t.Fatalf("Copy: %v (the attempt was followed past its end)", err)
			}
			if got.String() != "before\nlast words\n" {
				t.Fatalf("followed %q", got.String())
			}
		})
	}
}
