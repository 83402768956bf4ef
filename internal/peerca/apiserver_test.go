package peerca

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"afe.dev/sandbox/test/testenv"
)

// The Secret's life against a real API server: one control plane for the
// subtests, each with its own Secret in default.
func TestAgainstAPIServer(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: testenv.RequireAssets(t, "kube-apiserver", "etcd")}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("managers racing to make the CA share one", func(t *testing.T) { testRace(t, c) })
	t.Run("a rotation lost to another manager takes its CA", func(t *testing.T) { testLostRotation(t, c) })
	t.Run("Start follows a rotation by another manager", func(t *testing.T) { testStartFollows(t, c) })
	t.Run("a rotation keeps the managers connected", func(t *testing.T) { testRotationWindow(t, c) })
}

// Both managers read the Secret missing before either creates it: the one
// whose Create loses reads the winner's CA, and each admits the other.
func testRace(t *testing.T, base client.WithWatch) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "default", Name: "race"}
	c, creates := racing(base)
	clk := newClock()
	as := []*Authority{newAuthority(t, c, key, "node-a", clk), newAuthority(t, c, key, "node-b", clk)}
	errs := make([]error, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Go(func() { errs[i] = a.Ensure(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", as[i].opts.Node, err)
		}
	}
	made, lost := 0, 0
	for _, err := range creates() {
		if err == nil {
			made++
		} else if apierrors.IsAlreadyExists(err) {
			lost++
		}
	}
	if made != 1 || lost != 1 {
		t.Fatalf("creates: %v; want one made and one already there", creates())
	}
	secret := &corev1.Secret{}
	if err := base.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeOpaque || secret.Labels["app.kubernetes.io/name"] != "afe-sandbox" {
		t.Errorf("Secret of type %s, labels %v", secret.Type, secret.Labels)
	}
	for _, a := range as {
		if !bytes.Equal(a.CABundle(), secret.Data[caCertKey]) {
			t.Errorf("%s trusts another CA than the Secret's", a.opts.Node)
		}
	}
	reachEachOther(t, as[0], as[1])
}

// racing is base where the first two reads wait for each other, so that
// two managers both find the Secret missing, and the Create results.
func racing(base client.WithWatch) (client.Client, func() []error) {
	var reads atomic.Int32
	bothRead := make(chan struct{})
	var mu sync.Mutex
	var creates []error
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if n := reads.Add(1); n <= 2 {
				if n == 2 {
					close(bothRead)
				}
				select {
				case <-bothRead:
				case <-time.After(10 * time.Second):
				}
			}
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			mu.Lock()
			defer mu.Unlock()
			creates = append(creates, err)
			return err
		},
	})
	return c, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(creates)
	}
}

// Another manager rotates the CA between this one's read and its update:
// the update conflicts, and this manager takes the other's CA rather than
// rotating a second time, which would drop the CA the other's peers hold.
func testLostRotation(t *testing.T, base client.WithWatch) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "default", Name: "lost-rotation"}
	clk := newClock()
	b := newAuthority(t, base, key, "node-b", clk)
	var updateErrs []error
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if len(updateErrs) == 0 {
				if err := b.Ensure(ctx); err != nil {
					return err
				}
			}
			err := c.Update(ctx, obj, opts...)
			updateErrs = append(updateErrs, err)
			return err
		},
	})
	a := newAuthority(t, c, key, "node-a", clk)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	original := a.CABundle()
	clk.Set(clk.Now().Add(a.opts.CAValidity - a.opts.RotateBefore + time.Hour))
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if len(updateErrs) == 0 || !apierrors.IsConflict(updateErrs[0]) {
		t.Fatalf("updates: %v; want the first in conflict", updateErrs)
	}
	secret := &corev1.Secret{}
	if err := base.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[caPreviousKey], original) {
		t.Error("the previous CA is not the original: rotated twice")
	}
	want := append(bytes.Clone(secret.Data[caCertKey]), original...)
	if !bytes.Equal(a.CABundle(), want) || !bytes.Equal(b.CABundle(), want) {
		t.Error("the managers do not both trust the Secret's CA and the previous one")
	}
}

// A manager's Start reads a CA another manager rotated and tells Changed.
func testStartFollows(t *testing.T, base client.WithWatch) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := types.NamespacedName{Namespace: "default", Name: "follow"}
	a, err := New(base, Options{Secret: key, Node: "node-a", Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if a.NeedLeaderElection() {
		t.Error("every manager refreshes its own certificate, not the leader's only")
	}
	// Only b's clock is near the CA's expiry: b rotates, a follows.
	bClock := newClock()
	b := newAuthority(t, base, key, "node-b", bClock)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	changed := a.Changed()
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	bClock.Set(bClock.Now().Add(a.opts.CAValidity - a.opts.RotateBefore + time.Hour))
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire after another manager rotated the CA")
	}
	if !bytes.Equal(a.CABundle(), b.CABundle()) {
		t.Error("a follows another CA bundle than b's")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Start did not return when its context ended")
	}
}
