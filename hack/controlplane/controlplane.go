// Package controlplane runs a local Kubernetes control plane (etcd and
// kube-apiserver, as envtest starts them) whose state survives restarts: etcd
// keeps its data under the given folder, so a restarted controller finds its
// objects again as on a real cluster. For the per-node mode it also runs
// kube-scheduler and registers Nodes that no kubelet backs (StartScheduler,
// RegisterNode, SetNodeReady). It is a tool, no rule of the product: the
// command hack/localcp (which `make run` starts), hack/bench and the suites
// that need a control plane of their own (test/e2e, the access API's and
// the clients') import it.
package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"afe.dev/sandbox/internal/pki"
)

// startTimeout bounds each process's start and stop, and the wait for the
// CRDs to be served.
const startTimeout = time.Minute

// ControlPlane is a running local control plane.
type ControlPlane struct {
	// Dir holds etcd's data, the certificates and the kubeconfig.
	Dir string
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Kubeconfig is the path of the written kubeconfig.
	Kubeconfig string
	env        *envtest.Environment
	scheduler  *process // nil until StartScheduler
}

// Start starts a control plane keeping its state in dir, installs (or
// updates) the CRDs found in crdDirs, and writes dir/kubeconfig. assets is
// the folder of the kube-apiserver and etcd binaries.
func Start(dir, assets string, crdDirs ...string) (*ControlPlane, error) {
	if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
		return nil, err
	}
	// Serving certificates are made fresh each start: envtest only creates
	// them (and knows their CA) in an empty folder.
	certs := filepath.Join(dir, "certs")
	if err := os.RemoveAll(certs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, err
	}
	// envtest's bounds (20 s for each process to start, 10 s for the CRDs
	// to be served) are a test's on a quiet machine: an API server started
	// again on a stored etcd, beside a busy engine and other suites, passed
	// them. A user's control plane waits a minute.
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    len(crdDirs) > 0,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: startTimeout},
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  startTimeout,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs}
	if err := EnableAggregation(env.ControlPlane.APIServer, filepath.Join(certs, "front-proxy")); err != nil {
		return nil, err
	}
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cp := &ControlPlane{Dir: dir, env: env, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	user, err := env.AddUser(envtest.User{Name: "afe-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	cp.Config = user.Config()
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.WriteFile(cp.Kubeconfig, kubeconfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cp, nil
}

// EnableAggregation makes the API server an aggregator: it gets a
// front-proxy CA and client certificate made fresh under dir, presents the
// certificate to aggregated API servers (the manager's access API) with the
// caller's identity in request headers, and publishes the CA for them in
// kube-system/extension-apiserver-authentication.
func EnableAggregation(api *envtest.APIServer, dir string) error {
	flags, err := pki.FrontProxy(dir)
	if err != nil {
		return fmt.Errorf("front proxy certificates: %w", err)
	}
	args := api.Configure()
	for k, v := range flags {
		args.Set(k, v)
	}
	return nil
}

// Stop stops kube-scheduler (if started), the API server and etcd; their
// state stays in Dir.
func (cp *ControlPlane) Stop() error {
	if cp.scheduler != nil {
		cp.scheduler.stop()
		cp.scheduler = nil
	}
	_ = os.Remove(cp.Kubeconfig)
	return cp.env.Stop()
}
