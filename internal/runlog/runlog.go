// Package runlog keeps the whole output of each attempt of a Run, outside
// the workspace (which the workload controls), in a folder of the manager:
// <dir>/<Run UID>/<attempt>.log, bounded (--run-log-max) and then cut with
// a marker, and <attempt>.done once the attempt ended. The access API
// serves it while it grows (kubectl afe logs -f); a sweep removes the logs
// of Runs that no longer exist.
package runlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// DefaultMax is the default bound of a Run's logs, its attempts together.
const DefaultMax = 10 << 20

// Store is the folder of the logs.
type Store struct {
	Dir string
	// Max bounds the logs of a Run, its attempts together; 0 is
	// DefaultMax.
	Max int64
}

// Marker ends a log cut at the bound.
func Marker(limit int64) string {
	return fmt.Sprintf("\n[afe: output cut at %d bytes (--run-log-max); status.output has its last 32 KiB]\n", limit)
}

func (s *Store) max() int64 {
	if s.Max > 0 {
		return s.Max
	}
	return DefaultMax
}

func (s *Store) runDir(uid types.UID) (string, error) {
	u := string(uid)
	if u == "" || strings.ContainsAny(u, `/\.`) {
		return "", fmt.Errorf("run log: invalid UID %q", u)
	}
	return filepath.Join(s.Dir, u), nil
}

// Writer is one attempt's log being written.
type Writer struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	n, max    int64
	bound     int64 // the Run's, which the marker names
	truncated bool
}

// Create starts the log of the Run's attempt afresh, with the room its
// other attempts' logs left under the bound.
func (s *Store) Create(uid types.UID, attempt int32) (*Writer, error) {
	dir, err := s.runDir(uid)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, strconv.Itoa(int(attempt)))
	_ = os.Remove(p + ".done")
	f, err := os.OpenFile(p+".log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	used, err := othersSize(dir, filepath.Base(p)+".log")
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Writer{f: f, path: p, max: max(s.max()-used, 0), bound: s.max()}, nil
}

// othersSize is the bytes the logs in dir other than name take.
func othersSize(dir, name string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if e.Name() == name || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += info.Size()
	}
	return n, nil
}

// Write appends to the log up to the bound, then the marker once; it never
// fails the command's output.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncated {
		return len(p), nil
	}
	if room := w.max - w.n; int64(len(p)) > room {
		_, _ = w.f.Write(p[:room])
		_, _ = w.f.WriteString(Marker(w.bound))
		w.n, w.truncated = w.max, true
		return len(p), nil
	}
	n, _ := w.f.Write(p)
	w.n += int64(n)
	return len(p), nil
}

// Close ends the attempt's log: readers following it stop at its end.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.f.Close()
	if f, cerr := os.Create(w.path + ".done"); cerr == nil {
		_ = f.Close()
	} else {
		err = errors.Join(err, cerr)
	}
	return err
}

// ErrNoLog is a Run with no log kept (yet).
var ErrNoLog = errors.New("no log kept for this Run")

// Latest is the last attempt that has a log.
func (s *Store) Latest(uid types.UID) (int32, error) {
	dir, err := s.runDir(uid)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, ErrNoLog
	}
	if err != nil {
		return 0, err
	}
	var attempts []int
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			if a, err := strconv.Atoi(n); err == nil {
				attempts = append(attempts, a)
			}
		}
	}
	if len(attempts) == 0 {
		return 0, ErrNoLog
	}
	sort.Ints(attempts)
	return int32(attempts[len(attempts)-1]), nil
}

// Copy writes the attempt's log to w; with follow, it keeps writing what
// is appended until the attempt ends (or ctx does). An attempt has ended
// once its end is written, once a later attempt of the Run has a log, or
// once over (when not nil) says so: a manager killed during an attempt
// never writes its end, and only the Run (executed again, or ended) tells
// that nothing more comes.
func (s *Store) Copy(ctx context.Context, w io.Writer, flush func(), uid types.UID, attempt int32, follow bool, over func() bool) error {
	dir, err := s.runDir(uid)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, strconv.Itoa(int(attempt)))
	f, err := os.Open(p + ".log")
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoLog
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	for {
		// Whether it had ended is read before the last copy: what was
		// written before the end is all copied.
		ended := !follow || s.ended(uid, p, attempt) || over != nil && over()
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if flush != nil {
			flush()
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ended tells whether the attempt's end is written, or a later attempt
// has begun.
func (s *Store) ended(uid types.UID, p string, attempt int32) bool {
	if _, err := os.Stat(p + ".done"); err == nil {
		return true
	}
	latest, err := s.Latest(uid)
	return err == nil && latest > attempt
}

// Sweeper removes, every Period, the logs of Runs that no longer exist
// (and are older than a Period, so a Run just created is never mistaken).
type Sweeper struct {
	Store  *Store
	Client client.Reader
	Period time.Duration
}

// Start sweeps until ctx ends.
func (sw *Sweeper) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("runlog")
	t := time.NewTicker(sw.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := sw.sweep(ctx); err != nil {
				log.Error(err, "Cannot sweep the Run logs")
			}
		}
	}
}

// NeedLeaderElection is true: the leader runs the Runs.
func (sw *Sweeper) NeedLeaderElection() bool { return true }

func (sw *Sweeper) sweep(ctx context.Context) error {
	runs := &afev1.RunList{}
	if err := sw.Client.List(ctx, runs); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, r := range runs.Items {
		live[string(r.UID)] = true
	}
	entries, err := os.ReadDir(sw.Store.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || live[e.Name()] || time.Since(info.ModTime()) < sw.Period {
			continue
		}
		if err := os.RemoveAll(filepath.Join(sw.Store.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
