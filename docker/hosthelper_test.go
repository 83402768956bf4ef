package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestHostHelperRunsOnTheHostsNetwork: the helper runs a command with its
// input on the engine host's network (it sees the default bridge's device,
// which no container of its own network would), with NET_ADMIN alone
// (nft lists the host's tables), as root with no other capability; it is
// made once and used again, made again once removed, and replaced when it
// is of another image.
func TestHostHelperRunsOnTheHostsNetwork(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	labels["afe.role"] = "conntrack"
	name := uniqueName()
	h := engine.HostHelper(name, "afe/nft:dev", labels)

	bridge, err := engine.InspectNetwork(ctx, "bridge")
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run(ctx, "hello\n", "sh", "-c", "cat; ls /sys/class/net; grep ^CapEff /proc/self/status; nft list tables >/dev/null && echo nft-ok")
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	// NET_ADMIN is bit 12: CapEff 0x1000 and nothing else.
	for _, want := range []string{"hello\n", bridge.Bridge + "\n", "CapEff:\t0000000000001000\n", "nft-ok\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the helper's output lacks %q:\n%s", want, got)
		}
	}
	first := h.id
	if _, err := h.Run(ctx, "", "true"); err != nil || h.id != first {
		t.Errorf("a second command: %v, helper %s then %s: want the same helper", err, first, h.id)
	}
	if _, err := h.Run(ctx, "", "sh", "-c", "echo oops >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "exited 3: oops") {
		t.Errorf("a failing command: %v, want its exit code and stderr", err)
	}

	sh(t, "rm", "-f", name)
	if _, err := h.Run(ctx, "", "true"); err != nil || h.id == first {
		t.Errorf("after the helper was removed: %v (helper %s): want a new one", err, h.id)
	}
	older := engine.HostHelper(name, testImage, labels)
	if _, err := older.Run(ctx, "", "true"); err != nil {
		t.Fatalf("a helper of another image: %v, want it replaced", err)
	}
	if img := sh(t, "inspect", "-f", "{{.Config.Image}}", name); img != testImage {
		t.Errorf("the helper's image is %s, want %s (replaced)", img, testImage)
	}
}

// TestHostHelperNeverUsesAContainerItDidNotMake: a container of the
// helper's name with other labels (made by anyone with the engine's API)
// is neither exec'd into nor removed.
func TestHostHelperNeverUsesAContainerItDidNotMake(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	sh(t, "run", "-d", "--name", name, "--label", "afe.test="+labels["afe.test"], "--label", "afe.role=conntrack",
		"--network", "none", testImage, "sleep", "600")

	h := engine.HostHelper(name, "afe/nft:dev", map[string]string{"afe.test": labels["afe.test"], "afe.role": "conntrack", "afe.controller": "other"})
	_, err := h.Run(ctx, "", "touch", "/tmp/used")
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Run with a stranger's container of the name: %v, want ErrConflict", err)
	}
	if out := sh(t, "exec", name, "sh", "-c", "ls /tmp/used 2>/dev/null || echo unused"); out != "unused" {
		t.Errorf("the stranger's container was exec'd into: %s", out)
	}
	if img := sh(t, "inspect", "-f", "{{.Config.Image}}", name); img != testImage {
		t.Errorf("the stranger's container was replaced (image %s)", img)
	}
}
