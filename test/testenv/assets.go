package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AssetsDir is where the test control plane's binaries (kube-apiserver,
// etcd, kube-scheduler) are: KUBEBUILDER_ASSETS when it is set (the
// Makefile's targets set it), else where `make envtest` builds them,
// bin/envtest/<KUBE_VERSION> in the module's root, the version read from
// the Makefile, the one place it is written.
func AssetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	version, err := KubeVersion(root)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "envtest", version), nil
}

// RequireAssets is AssetsDir for a plain Go test that needs the named
// binaries there: without them the test is skipped, except under CI,
// where it fails.
func RequireAssets(t testing.TB, binaries ...string) string {
	t.Helper()
	dir, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no %s in %s (make envtest): %v", b, dir, err)
			}
			t.Skipf("no %s in %s (make envtest): %v", b, dir, err)
		}
	}
	return dir
}

// Root is the module's root: the nearest folder with a go.mod from the
// working directory up (a test runs in its package's folder).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// KubeVersion is the Kubernetes version of the test control plane, as the
// Makefile in root sets KUBE_VERSION, without its v: the name of its
// folder under bin/envtest.
func KubeVersion(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := MakeVariable(s.Text(), "KUBE_VERSION"); ok {
			return strings.TrimPrefix(v, "v"), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s sets no KUBE_VERSION", f.Name())
}

// MakeVariable is the value line gives the make variable name ("NAME ?=
// value", with ?=, := or =), if it sets it. The tour's test reads the
// Makefile's variables with it too.
func MakeVariable(line, name string) (string, bool) {
	rest, ok := strings.CutPrefix(line, name)
	if !ok {
		return "", false
	}
	rest = strings.TrimLeft(rest, " \t")
	for _, op := range []string{"?=", ":=", "="} {
		if v, ok := strings.CutPrefix(rest, op); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
