package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRegisterKeepsEverySettingAndIsIdempotent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "daemon.json")
	before := `{"storage-driver": "overlay2", "log-opts": {"max-size": "10m"}, "runtimes": {"kata": {"path": "/usr/bin/kata"}}}`
	if err := os.WriteFile(file, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		changed, err := register(file, "runsc", "/usr/bin/runsc", []string{"--platform=ptrace", "--network=host"})
		if err != nil || changed != want {
			t.Fatalf("call %d: changed %v, %v; want %v", i, changed, err, want)
		}
	}
	var got map[string]any
	data, _ := os.ReadFile(file)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"storage-driver": "overlay2",
		"log-opts":       map[string]any{"max-size": "10m"},
		"runtimes": map[string]any{
			"kata":  map[string]any{"path": "/usr/bin/kata"},
			"runsc": map[string]any{"path": "/usr/bin/runsc", "runtimeArgs": []any{"--platform=ptrace", "--network=host"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("daemon.json:\n%s", data)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want the file's own 0600", st.Mode().Perm())
	}
	// Other arguments: registered anew.
	if changed, err := register(file, "runsc", "/usr/bin/runsc", []string{"--platform=kvm"}); err != nil || !changed {
		t.Fatalf("changed arguments: %v %v", changed, err)
	}
}

func TestRegisterMakesAMissingFileAndRefusesAnotherShape(t *testing.T) {
	dir := t.TempDir()
	if changed, err := register(filepath.Join(dir, "daemon.json"), "runsc", "/usr/bin/runsc", nil); err != nil || !changed {
		t.Fatalf("missing file: %v %v", changed, err)
	}
	for name, content := range map[string]string{"array": `[]`, "runtimes a list": `{"runtimes": []}`, "broken": `{"a":`} {
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := register(file, "runsc", "/usr/bin/runsc", nil); err == nil {
			t.Errorf("%s: no error", name)
		}
		if data, _ := os.ReadFile(file); string(data) != content {
			t.Errorf("%s: the file was changed to %s", name, data)
		}
	}
}
