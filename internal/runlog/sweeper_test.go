package runlog

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/testenv"
)

// assets is where `make envtest` puts kube-apiserver and etcd; without
// them the test is skipped, except under CI.
func assets(t *testing.T) string {
	t.Helper()
	return testenv.RequireAssets(t, "kube-apiserver")
}

// apiServer is a client of a real API server with the project's CRDs.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets(t),
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	scheme := runtime.NewScheme()
	if err := afev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeLog keeps an ended attempt's log of the Run, made long ago.
func writeLog(t *testing.T, s *Store, uid types.UID, age time.Duration) string {
	t.Helper()
	w, err := s.Create(uid, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("output of " + string(uid) + "\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir, string(uid))
	then := time.Now().Add(-age)
	if err := os.Chtimes(dir, then, then); err != nil {
		t.Fatal(err)
	}
	return dir
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// A Run's log folder stays while the Run exists, however old, and goes
// once the Run is gone.
func TestSweeperTiesTheLogsToTheirRuns(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newRun := func(name string) *afev1.Run {
		run := &afev1.Run{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: "box"}, Command: []string{"true"}},
		}
		if err := c.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		return run
	}
	deleteRun := func(run *afev1.Run) {
		if err := c.Delete(ctx, run); err != nil {
			t.Fatal(err)
		}
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(run), &afev1.Run{})
			if apierrors.IsNotFound(err) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s still there: %v", run.Name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	s := &Store{Dir: t.TempDir()}
	kept, gone := newRun("kept"), newRun("gone")
	keptDir := writeLog(t, s, kept.UID, 2*time.Hour)
	goneDir := writeLog(t, s, gone.UID, 2*time.Hour)
	// A log no Run has: one just made is kept (its Run may not be seen
	// yet), one older than a period is removed.
	fresh := writeLog(t, s, "no-run-yet", 0)
	stale := writeLog(t, s, "no-run-anymore", 2*time.Hour)

	sw := &Sweeper{Store: s, Client: c, Period: time.Hour}
	if err := sw.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what, dir string
		want      bool
	}{
		{"the log of a Run that exists", keptDir, true},
		{"the log of another Run that exists", goneDir, true},
		{"a log just made of no Run", fresh, true},
		{"an old log of no Run", stale, false},
	} {
		if got := exists(t, tc.dir); got != tc.want {
			t.Errorf("after a sweep, %s exists: %v, want %v", tc.what, got, tc.want)
		}
	}

	deleteRun(gone)
	if err := sw.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, goneDir) {
		t.Error("the log of a deleted Run was kept")
	}
	var got []byte
	if got, _ = os.ReadFile(filepath.Join(keptDir, "1.log")); string(got) != "output of "+string(kept.UID)+"\n" {
		t.Errorf("the log of a Run that exists is %q", got)
	}

	// Started, it sweeps every period.
	sw.Period = 200 * time.Millisecond
	done := make(chan error)
	sctx, stop := context.WithCancel(ctx)
	go func() { done <- sw.Start(sctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(time.Second)
	if !exists(t, keptDir) {
		t.Fatal("the log of a Run that exists was removed")
	}
	deleteRun(kept)
	for deadline := time.Now().Add(30 * time.Second); exists(t, keptDir); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the log of a deleted Run was kept by the running sweeper")
		}
	}
}
