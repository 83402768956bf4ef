// Command daemonjson registers an OCI runtime in a Docker engine's
// daemon.json, keeping every other setting: hack/install-runsc.sh uses it.
//
//	daemonjson -file /etc/docker/daemon.json -name runsc -path /usr/local/lib/afe/runsc-v0.0.0-... -arg --platform=systrap -arg --overlay2=none
//
// It prints "unchanged" when the runtime is registered as asked already,
// and "registered" after writing the file (atomically, with the old file's
// mode). An entry of the same name registered otherwise is replaced whole:
// its path and arguments are those asked, nothing of the old one is kept.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

type args []string

func (a *args) String() string     { return strings.Join(*a, " ") }
func (a *args) Set(v string) error { *a = append(*a, v); return nil }

func main() {
	var file, name, path string
	var runtimeArgs args
	flag.StringVar(&file, "file", "/etc/docker/daemon.json", "The engine's daemon.json.")
	flag.StringVar(&name, "name", "runsc", "The runtime's name.")
	flag.StringVar(&path, "path", "", "The runtime's binary (required).")
	flag.Var(&runtimeArgs, "arg", "An argument the engine gives the runtime (repeatable).")
	flag.Parse()
	if path == "" {
		fmt.Fprintln(os.Stderr, "daemonjson: -path is required")
		os.Exit(2)
	}
	changed, err := register(file, name, path, runtimeArgs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemonjson:", err)
		os.Exit(1)
	}
	if changed {
		fmt.Println("registered")
	} else {
		fmt.Println("unchanged")
	}
}

// register puts the runtime under "runtimes" in the file (made when
// missing), and tells whether the file changed.
func register(file, name, path string, runtimeArgs []string) (bool, error) {
	settings := map[string]any{}
	mode := fs.FileMode(0o644)
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	default:
		if st, err := os.Stat(file); err == nil {
			mode = st.Mode().Perm()
		}
		if len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, &settings); err != nil {
				return false, fmt.Errorf("%s is not a JSON object: %w", file, err)
			}
		}
	}
	runtimes, ok := settings["runtimes"].(map[string]any)
	if settings["runtimes"] != nil && !ok {
		return false, fmt.Errorf("%s: \"runtimes\" is not an object", file)
	}
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	want := map[string]any{"path": path}
	if len(runtimeArgs) > 0 {
		list := make([]any, len(runtimeArgs))
		for i, a := range runtimeArgs {
			list[i] = a
		}
		want["runtimeArgs"] = list
	}
	if reflect.DeepEqual(runtimes[name], want) {
		return false, nil
	}
	runtimes[name] = want
	settings["runtimes"] = runtimes
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".daemon.json-")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), file)
}
