package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const runsc = "/usr/local/lib/afe/runsc-v0.0.0-20260905035102-160fafc42237"

// registerTwice registers runsc as make runsc does, twice: a change, then
// none.
func registerTwice(t *testing.T, file string) {
	t.Helper()
	for i, want := range []bool{true, false} {
		changed, err := register(file, "runsc", runsc, []string{"--platform=systrap", "--overlay2=none"})
		if err != nil || changed != want {
			t.Fatalf("call %d: changed %v, %v; want %v", i, changed, err, want)
		}
	}
}

func TestRegisterKeepsEverySettingAndIsIdempotent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "daemon.json")
	before := `{"storage-driver": "overlay2", "log-opts": {"max-size": "10m"}, "runtimes": {"kata": {"path": "/usr/bin/kata"}}}`
	if err := os.WriteFile(file, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	registerTwice(t, file)
	want := map[string]any{
		"storage-driver": "overlay2",
		"log-opts":       map[string]any{"max-size": "10m"},
		"runtimes": map[string]any{
			"kata":  map[string]any{"path": "/usr/bin/kata"},
			"runsc": map[string]any{"path": runsc, "runtimeArgs": []any{"--platform=systrap", "--overlay2=none"}},
		},
	}
	if got, data := read(t, file); !reflect.DeepEqual(got, want) {
		t.Fatalf("daemon.json:\n%s", data)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want the file's own 0600", st.Mode().Perm())
	}
	// Other arguments: registered anew.
	if changed, err := register(file, "runsc", runsc, []string{"--platform=kvm"}); err != nil || !changed {
		t.Fatalf("changed arguments: %v %v", changed, err)
	}
}

// An entry of the name registered otherwise (Debian's runsc, as make runsc
// registered it before it built gVisor's own) is replaced whole: the new
// path, only the new arguments, nothing of the old entry; another runtime
// and every other setting are kept.
func TestRegisterReplacesAnEntryOfTheName(t *testing.T) {
	file := filepath.Join(t.TempDir(), "daemon.json")
	before := `{"mtu": 1400, "runtimes": {
		"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"], "options": {"x": 1}},
		"runsc-next": {"path": "/usr/local/bin/runsc-next", "runtimeArgs": ["--platform=systrap"]}}}`
	if err := os.WriteFile(file, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	registerTwice(t, file)
	want := map[string]any{
		"mtu": float64(1400),
		"runtimes": map[string]any{
			"runsc":      map[string]any{"path": runsc, "runtimeArgs": []any{"--platform=systrap", "--overlay2=none"}},
			"runsc-next": map[string]any{"path": "/usr/local/bin/runsc-next", "runtimeArgs": []any{"--platform=systrap"}},
		},
	}
	if got, data := read(t, file); !reflect.DeepEqual(got, want) {
		t.Fatalf("daemon.json:\n%s", data)
	}
	// Only the path changes (a new pin): registered anew, arguments kept as asked.
	newer := runsc + "-newer"
	if changed, err := register(file, "runsc", newer, []string{"--platform=systrap", "--overlay2=none"}); err != nil || !changed {
		t.Fatalf("changed path: %v %v", changed, err)
	}
	got, data := read(t, file)
	if entry := got["runtimes"].(map[string]any)["runsc"]; !reflect.DeepEqual(entry, map[string]any{"path": newer, "runtimeArgs": []any{"--platform=systrap", "--overlay2=none"}}) {
		t.Fatalf("daemon.json:\n%s", data)
	}
	// No arguments asked: none registered, the old ones dropped.
	if changed, err := register(file, "runsc", newer, nil); err != nil || !changed {
		t.Fatalf("no arguments: %v %v", changed, err)
	}
	got, data = read(t, file)
	if entry := got["runtimes"].(map[string]any)["runsc"]; !reflect.DeepEqual(entry, map[string]any{"path": newer}) {
		t.Fatalf("daemon.json:\n%s", data)
	}
}

func TestRegisterMakesAMissingFileAndRefusesAnotherShape(t *testing.T) {
	dir := t.TempDir()
	if changed, err := register(filepath.Join(dir, "daemon.json"), "runsc", runsc, nil); err != nil || !changed {
		t.Fatalf("missing file: %v %v", changed, err)
	}
	for name, content := range map[string]string{"array": `[]`, "runtimes a list": `{"runtimes": []}`, "broken": `{"a":`} {
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := register(file, "runsc", runsc, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
		if data, _ := os.ReadFile(file); string(data) != content {
			t.Errorf("%s: the file was changed to %s", name, data)
		}
	}
}

// read is the file's settings, and its text for a failure's message.
func read(t *testing.T, file string) (map[string]any, []byte) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	return got, data
}
