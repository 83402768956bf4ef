package controlplane

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/test/testenv"
)

func assets(t *testing.T) string {
	t.Helper()
	return testenv.RequireAssets(t, "kube-apiserver")
}

// The state of the control plane survives a restart, and each start writes a
// kubeconfig that works.
func TestStateSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cp, err := Start(dir, assets(t))
	if err != nil {
		t.Fatal(err)
	}
	c := clientFromKubeconfig(t, cp.Kubeconfig)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}

	cp, err = Start(dir, assets(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	got := &corev1.ConfigMap{}
	if err := clientFromKubeconfig(t, cp.Kubeconfig).Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("got %v", got.Data)
	}
}

func clientFromKubeconfig(t *testing.T, path string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
