package hostgroups

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// debianGroups is a Debian host's group file, trimmed, with a few lines a
// parser must survive.
const debianGroups = `root:x:0:
daemon:x:1:
adm:x:4:syslog
tty:x:5:
disk:x:6:
kmem:x:15:
sudo:x:27:alice
shadow:x:42:
staff:x:50:
users:x:100:
systemd-journal:x:999:
docker:x:105:alice,bob
+nisgroup::::
# a comment
broken line
nogid:x::
kvm:x:abc:
docker:x:4242:
`

// socketGroup owns the fixture's socket when the test runs as root; else
// the socket has this process's group.
const socketGroup = 4343

// fixture writes a group file and a unix socket into a temporary folder.
func fixture(t *testing.T, groups string) (groupFile, socket string, socketGID int) {
	t.Helper()
	dir := t.TempDir()
	groupFile = filepath.Join(dir, "group")
	if err := os.WriteFile(groupFile, []byte(groups), 0o644); err != nil {
		t.Fatal(err)
	}
	socket = filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	want := os.Getegid()
	if os.Geteuid() == 0 {
		// Root's group is among the privileged ones anyway: give the
		// socket a group of its own, so that the test sees it found.
		if err := os.Chown(socket, -1, socketGroup); err != nil {
			t.Fatal(err)
		}
		want = socketGroup
	}
	gid, err := SocketGID(socket)
	if err != nil {
		t.Fatal(err)
	}
	if gid != want {
		t.Fatalf("socket gid %d, want %d", gid, want)
	}
	return groupFile, socket, gid
}

func TestRead(t *testing.T) {
	groupFile, _, _ := fixture(t, debianGroups)
	got, err := Read(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"root": 0, "daemon": 1, "adm": 4, "tty": 5, "disk": 6, "kmem": 15, "sudo": 27, "shadow": 42,
		"staff": 50, "users": 100, "systemd-journal": 999, "docker": 105, // the first docker line wins
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	missing, err := Read(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(missing) != 0 {
		t.Fatalf("a missing file: %v, %v", missing, err)
	}
}

func TestSocketPath(t *testing.T) {
	for host, want := range map[string]string{
		"unix:///var/run/docker.sock":    "/var/run/docker.sock",
		"unix:///run/user/1000/d.sock":   "/run/user/1000/d.sock",
		"tcp://docker.example:2376":      "",
		"ssh://me@host":                  "",
		"npipe:////./pipe/docker_engine": "",
		"":                               "",
	} {
		if got := SocketPath(host); got != want {
			t.Errorf("SocketPath(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestDenyGIDs(t *testing.T) {
	groupFile, socket, sockGID := fixture(t, debianGroups)
	// The privileged groups of debianGroups: root adm tty disk kmem sudo
	// shadow staff systemd-journal docker.
	privileged := []int{0, 4, 5, 6, 15, 27, 42, 50, 105, 999}
	with := func(extra ...int) []int {
		out := append(append([]int{}, privileged...), extra...)
		out, _ = normalize(out)
		return out
	}
	tests := map[string]struct {
		flag, socket, groupFile string
		want                    []int
		wantErr                 string
	}{
		"defaults, local engine":  {socket: socket, groupFile: groupFile, want: with(sockGID)},
		"defaults, remote engine": {groupFile: groupFile, want: privileged},
		"numbers are added":       {flag: "4242, 70000", groupFile: groupFile, want: with(4242, 70000)},
		"names are resolved":      {flag: "users,daemon", groupFile: groupFile, want: with(100, 1)},
		"a default again":         {flag: "105,docker", groupFile: groupFile, want: privileged},
		"empty entries":           {flag: ",, ,", groupFile: groupFile, want: privileged},
		"no group file":           {flag: "4242", socket: socket, groupFile: filepath.Join(t.TempDir(), "none"), want: sortedGIDs(sockGID, 4242)},
		"an unknown name":         {flag: "wheel", groupFile: groupFile, wantErr: `no group "wheel"`},
		"a name, no group file":   {flag: "docker", groupFile: filepath.Join(t.TempDir(), "none"), wantErr: `no group "docker"`},
		"a negative gid":          {flag: "-1", groupFile: groupFile, wantErr: `no group "-1"`},
		"a huge gid":              {flag: "99999999999", groupFile: groupFile, wantErr: "is not a gid"},
		"a Run group":             {flag: "2000000005", groupFile: groupFile, wantErr: "the groups the controller gives the commands of Runs"},
		"a host group among Run groups": {
			groupFile: writeGroups(t, "docker:x:2050000000:\n"), wantErr: "gid 2050000000 is denied",
		},
		"a missing socket": {socket: filepath.Join(t.TempDir(), "docker.sock"), groupFile: groupFile, wantErr: "find the group of the engine's socket"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DenyGIDs(tc.flag, tc.socket, tc.groupFile)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// On a host with few of the privileged groups, only those it has are
// denied, plus the socket's group.
func TestDefaultsOnlyWhatExists(t *testing.T) {
	groupFile, socket, sockGID := fixture(t, "wheel:x:10:\nlxd:x:108:\nusers:x:100:\n")
	got, err := Defaults(socket, groupFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sortedGIDs(sockGID, 10, 108), got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func sortedGIDs(gids ...int) []int {
	out, _ := normalize(gids)
	return out
}

func writeGroups(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "group")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A manager may start before its engine's socket exists: the list fails
// (so no sandbox user passes) until the socket appears, then holds its
// group for good.
func TestDenyListFindsTheSocketLater(t *testing.T) {
	groupFile, socket, sockGID := fixture(t, debianGroups)
	later := filepath.Join(t.TempDir(), "docker.sock")
	d, err := NewDenyList("4242", later, groupFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.GIDs(); err == nil || !strings.Contains(err.Error(), "find the group of the engine's socket") {
		t.Fatalf("GIDs() before the socket exists: err = %v, want the socket's lookup error", err)
	}
	if !strings.Contains(d.String(), "not found yet") {
		t.Errorf("String() = %q, want it to say the socket's group is still unknown", d.String())
	}
	if err := os.Rename(socket, later); err != nil {
		t.Fatal(err)
	}
	want, err := DenyGIDs("4242", later, groupFile)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(want, sockGID) {
		t.Fatalf("DenyGIDs = %v, want the socket's group %d in it", want, sockGID)
	}
	got, err := d.GIDs()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("GIDs() once the socket exists (-want +got):\n%s", diff)
	}
	if err := os.Remove(later); err != nil {
		t.Fatal(err)
	}
	if again, err := d.GIDs(); err != nil || !slices.Contains(again, sockGID) {
		t.Fatalf("GIDs() after the socket went away = %v, %v; want the group found before", again, err)
	}
}

func TestDenyListOfARemoteEngine(t *testing.T) {
	groupFile, _, _ := fixture(t, debianGroups)
	d, err := NewDenyList("", "", groupFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.GIDs()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DenyGIDs("", "", groupFile)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	var none *DenyList
	if gids, err := none.GIDs(); err != nil || gids != nil {
		t.Fatalf("nil DenyList: %v, %v", gids, err)
	}
}
