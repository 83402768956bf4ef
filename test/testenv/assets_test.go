package testenv

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMakeVariable(t *testing.T) {
	tests := map[string]struct {
		line   string
		want   string
		wantOK bool
	}{
		"conditional":     {line: "KUBE_VERSION ?= v1.37.2", want: "v1.37.2", wantOK: true},
		"simple":          {line: "KUBE_VERSION := v1.38.0", want: "v1.38.0", wantOK: true},
		"recursive":       {line: "KUBE_VERSION=v1.36.1 ", want: "v1.36.1", wantOK: true},
		"another":         {line: "KUBE_VERSIONS ?= x"},
		"a use":           {line: "ENVTEST_DIR = $(LOCALBIN)/envtest/$(KUBE_VERSION:v%=%)"},
		"in a recipe":     {line: "\t@KUBE_VERSION=$(KUBE_VERSION) hack/build-envtest.sh"},
		"name only":       {line: "KUBE_VERSION"},
		"another operand": {line: "KUBE_VERSION += x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := MakeVariable(tc.line, "KUBE_VERSION")
			if diff := cmp.Diff(tc.want, got); diff != "" || ok != tc.wantOK {
				t.Errorf("MakeVariable(%q): ok %v, want %v; value (-want +got):\n%s", tc.line, ok, tc.wantOK, diff)
			}
		})
	}
}

// The folder the suites look in is the one `make envtest` fills: the
// Makefile's KUBE_VERSION without its v, under bin/envtest.
func TestAssetsDirIsTheMakefiles(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs(filepath.Join("..", "..")); root != want {
		t.Fatalf("Root() = %s, want %s", root, want)
	}
	version, err := KubeVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	if version == "" || version[0] == 'v' {
		t.Fatalf("KubeVersion() = %q, want a version without its v", version)
	}
	dir, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "bin", "envtest", version); dir != want {
		t.Errorf("AssetsDir() = %s, want %s", dir, want)
	}
	t.Setenv("KUBEBUILDER_ASSETS", "/elsewhere")
	if dir, err := AssetsDir(); err != nil || dir != "/elsewhere" {
		t.Errorf("AssetsDir() with KUBEBUILDER_ASSETS set = %s, %v; want /elsewhere", dir, err)
	}
}
