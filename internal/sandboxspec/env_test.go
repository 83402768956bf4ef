package sandboxspec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestDeclaredEnvEntersOnlyAContainerWithItsOwnCommand(t *testing.T) {
	proxy := ProxyEnvFor()
	tests := map[string]struct {
		command  []string
		resolved Resolved
		want     []string
	}{
		"keep-alive: none of the declared env": {
			resolved: Resolved{Env: []string{"API_TOKEN=s3cr3t", "A=1"}},
			want:     []string{},
		},
		"keep-alive with egress: the proxy variables only": {
			resolved: Resolved{Env: []string{"API_TOKEN=s3cr3t"}, ProxyEnv: proxy},
			want:     proxy,
		},
		"its own command: the declared env, then the proxy variables": {
			command:  []string{"my-agent"},
			resolved: Resolved{Env: []string{"API_TOKEN=s3cr3t"}, ProxyEnv: proxy},
			want:     append([]string{"API_TOKEN=s3cr3t"}, proxy...),
		},
		"its own command, no env": {
			command: []string{"my-agent"},
			want:    []string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := testSandbox()
			sbx.Spec.Command = tc.command
			tc.resolved.Workspace = "v"
			got := Container(sbx, IdentityOf(sbx, "default"), tc.resolved)
			if d := cmp.Diff(tc.want, got.Env); d != "" {
				t.Fatal(d)
			}
			if len(tc.command) == 0 && strings.Contains(strings.Join(got.Env, "\n"), "s3cr3t") {
				t.Fatalf("a keep-alive container holds a declared value: %v", got.Env)
			}
		})
	}
}

func TestEnvChangeRecreatesOnlyAContainerWithItsOwnCommand(t *testing.T) {
	hash := func(command []string, env ...string) string {
		sbx := testSandbox()
		sbx.Spec.Command = command
		return Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v", Env: env}).Labels[afev1.LabelSpecHash]
	}
	if hash(nil, "A=1") != hash(nil, "A=2") || hash(nil) != hash(nil, "A=1") {
		t.Fatal("the declared env of a keep-alive container changes its spec hash")
	}
	// A container without env renders it as it always did (an empty list,
	// never null): it keeps its hash through the upgrade.
	sbx := testSandbox()
	if b, _ := json.Marshal(Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v", Env: []string{"A=1"}})); !strings.Contains(string(b), `"Env":[]`) {
		t.Fatalf("the hashed JSON of a keep-alive container renders its env otherwise: %s", b)
	}
	// A keep-alive container the previous version made held its env in
	// its config, and so in its hash: it differs, and is recreated once
	// (a drift, the workspace kept), which takes the values out of it.
	withEnv := Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v", Env: []string{"A=1"}})
	previous := withEnv
	previous.Env = []string{"A=1"}
	if Hash(previous) == withEnv.Labels[afev1.LabelSpecHash] {
		t.Fatal("a container made with its env in its config keeps its hash: its values would stay in it")
	}
	own := []string{"my-agent"}
	if hash(own, "A=1") == hash(own, "A=2") {
		t.Fatal("the declared env of a container with its own command is not in its spec hash")
	}
}

func TestExecEnv(t *testing.T) {
	tests := map[string]struct {
		declared, own, want []string
	}{
		"nothing":               {},
		"the declared env":      {declared: []string{"A=1", "B=x=y"}, want: []string{"A=1", "B=x=y"}},
		"a builtin's own":       {own: []string{"AFE_LANES=2"}, want: []string{"AFE_LANES=2"}},
		"both, in that order":   {declared: []string{"A=1"}, own: []string{"AFE_LANES=2"}, want: []string{"A=1", "AFE_LANES=2"}},
		"the command's own win": {declared: []string{"AFE_LANES=9", "A=1"}, own: []string{"AFE_LANES=2"}, want: []string{"A=1", "AFE_LANES=2"}},
		"an empty value":        {declared: []string{"EMPTY="}, want: []string{"EMPTY="}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ExecEnv(tc.declared, tc.own)); d != "" {
				t.Fatal(d)
			}
		})
	}
}
