package fakeengine_test

import (
	"testing"

	"afe.dev/sandbox/test/enginecontract"
	"afe.dev/sandbox/test/fakeengine"
)

const image = "afe/busybox:dev"

// TestContract runs against the fake the cases test/enginecontract also runs
// against the real engine.
func TestContract(t *testing.T) {
	e := fakeengine.New(image)
	enginecontract.Run(t, e, enginecontract.Harness{
		Image: image,
		Kill: func(t *testing.T, container string) {
			t.Helper()
			if err := e.Exit(container, 137, false); err != nil {
				t.Fatal(err)
			}
		},
		WriteFile: func(t *testing.T, volume, path, content string) {
			t.Helper()
			if err := e.WriteFile(volume, path, content); err != nil {
				t.Fatal(err)
			}
		},
		ReadFile: func(_ *testing.T, volume, path string) string { return e.Files(volume)[path] },
	})
}
