// Package python_test runs the Python client's tests (clients/python/tests,
// pytest under Debian's /usr/bin/python3) against a local control plane,
// the manager binary serving the access API, and the real engine, as `make
// run` sets them up. It is how `go test ./...` and `make test` run them:
// where Python, its kubernetes package or pytest is missing, it fails,
// never skips (make python-deps installs them).
package python_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/testenv"
)

// python is Debian's interpreter, where python3-kubernetes and
// python3-pytest install; another Python may come first on PATH.
const python = "/usr/bin/python3"

// egressHost is the test web server's name on the egress network: the
// host the tests' sandboxes may reach (AFE_EGRESS_HOST for pytest).
const egressHost = "allowed.test"

func TestPythonClient(t *testing.T) {
	requirePython(t)
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	assets := testenv.RequireAssets(t, "kube-apiserver", "etcd")
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	instance := fmt.Sprintf("python-%d", os.Getpid())
	t.Cleanup(func() { dockertest.RemoveAll(afev1.LabelController + "=" + instance) })
	network := startWebServer(t, engine, instance)

	cp, err := controlplane.Start(t.TempDir(), assets, filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if err := cp.ApplyManifests(ctx, filepath.Join(root, "config", "rbac", "access_roles.yaml")); err != nil {
		t.Fatal(err)
	}
	args := []string{"--egress-network", network, "--egress-allow-private"}
	if img := os.Getenv("AFE_PROXY_IMAGE"); img != "" {
		// A candidate proxy image, as the controllers' suite takes it.
		args = append(args, "--proxy-image", img)
	}
	startManager(t, managerBinary(t, root), cp.Kubeconfig, instance, args...)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	waitAccessAPI(t, cp.Kubeconfig)
	ns := "python-client"
	kubeconfig := userKubeconfig(t, kube, cp, ns)

	start := time.Now()
	out, err := pytest(t, kubeconfig, ns)
	t.Logf("pytest (%s):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("pytest failed: %v", err)
	}
}

// requirePython fails the test when Debian's Python cannot import what
// the client and its tests need.
func requirePython(t *testing.T) {
	out, err := exec.Command(python, "-c", "import kubernetes, pytest, setuptools, wheel, ensurepip, venv, pip").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot run the Python client's tests (run `make python-deps` as root): %v\n%s", python, err, out)
	}
}

// startWebServer runs the test web server on an egress network of the
// test's own, known there as allowed.test, and returns the network.
func startWebServer(t *testing.T, engine *docker.Client, instance string) string {
	ctx := context.Background()
	network := "afe-" + instance + "-egress"
	labels := map[string]string{afev1.LabelController: instance}
	if _, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: network, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	_, err := engine.RunContainer(ctx, docker.ContainerSpec{
		Name: "afe-" + instance + "-web", Image: dockertest.TestImage, Labels: labels, Network: network,
		Aliases: []string{egressHost},
		Command: []string{"sh", "-c", "mkdir -p /www && echo hello-from-test-web > /www/index.html && exec httpd -f -p 80 -h /www"},
		CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"}, Init: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return network
}

// managerBinary is AFE_MANAGER_BIN (make test builds it), or the manager
// built into the test's folder.
func managerBinary(t *testing.T, root string) string {
	if bin := os.Getenv("AFE_MANAGER_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the manager: %v\n%s", err, out)
	}
	return bin
}

// startManager runs the manager as `make run` does (the access API through
// the API server, an ExternalName Service to localhost), with its log in
// the test's output when the test fails.
func startManager(t *testing.T, bin, kubeconfig, instance string, args ...string) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--instance", instance,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--resync-period", "30s",
		"--access-bind-address", "127.0.0.1:0", "--access-register", "--access-external-name", "localhost",
		"--access-service", "afe-local/access", "--run-log-dir", filepath.Join(dir, "run-logs"),
		"--telemetry-db", filepath.Join(dir, "telemetry.db")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		// The manager ends with the signal's status: not an error here.
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("manager log:\n%s", tail(string(data), 200))
		}
	})
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitAccessAPI waits until the manager has registered the access API
// and the aggregator calls it available.
func waitAccessAPI(t *testing.T, kubeconfig string) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "apiservice/v1alpha1.access.sandbox.afe.dev",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`).CombinedOutput()
		if err == nil && string(out) == "True" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the access API did not become available: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// userKubeconfig writes a kubeconfig for a ServiceAccount of ns bound to
// afe-sandbox-user there, as a workflow engine's identity, and waits
// until the API server's authorizer allows it.
func userKubeconfig(t *testing.T, kube kubernetes.Interface, cp *controlplane.ControlPlane, ns string) string {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "engine"}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "engine-afe-sandbox-user"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "afe-sandbox-user"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "engine", Namespace: ns}},
	}, metav1.CreateOptions{})
	must(err)
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "engine",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(7200))}}, metav1.CreateOptions{})
	must(err)
	waitAllowed(t, kube, ns, "system:serviceaccount:"+ns+":engine")

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	cfg.AuthInfos["engine"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["engine"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "engine", Namespace: ns}
	cfg.CurrentContext = "engine"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(clientcmd.WriteToFile(*cfg, path))
	return path
}

// waitAllowed waits until the authorizer lets user create sandboxes and
// exec in them in ns (a new binding takes a moment to reach its cache).
func waitAllowed(t *testing.T, kube kubernetes.Interface, ns, user string) {
	deadline := time.Now().Add(30 * time.Second)
	for _, attrs := range []authzv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Group: afev1.GroupVersion.Group, Resource: "sandboxes"},
		{Namespace: ns, Verb: "create", Group: "access.sandbox.afe.dev", Resource: "sandboxes", Subresource: "exec"},
	} {
		for {
			sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
				Spec: authzv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			if err == nil && sar.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not allowed to %s %s/%s in %s: %v %+v", user, attrs.Verb, attrs.Resource, attrs.Subresource, ns, err, sar)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// pytest runs the Python tests with Debian's interpreter, the package
// from this folder, and the user's kubeconfig; AFE_PYTEST_ARGS adds
// arguments (a -k to focus on some while working on them).
func pytest(t *testing.T, kubeconfig, ns string) (string, error) {
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
		defer cancel()
	}
	args := append([]string{"-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"}, strings.Fields(os.Getenv("AFE_PYTEST_ARGS"))...)
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "AFE_NAMESPACE="+ns, "AFE_EGRESS_HOST="+egressHost,
		"PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
