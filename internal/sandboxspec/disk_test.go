package sandboxspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/enginespec"
)

func TestDiskLimit(t *testing.T) {
	// What of the container spec resources.disk decides.
	type limits struct {
		ReadOnlyRootfs   bool
		Tmpfs            map[string]string
		StorageSizeBytes int64
		Ulimits          []enginespec.Ulimit
	}
	nofile := enginespec.Ulimit{Name: "nofile", Soft: 4096, Hard: 4096}
	tests := map[string]struct {
		disk       string
		how        afev1.DiskEnforcement
		cpuSeconds int64
		want       limits
	}{
		"no disk limit: as before, a writable root": {
			how:  afev1.DiskReadOnlyRoot,
			want: limits{Ulimits: []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
		},
		"read-only root, /tmp the limit": {
			disk: "64Mi", how: afev1.DiskReadOnlyRoot,
			want: limits{ReadOnlyRootfs: true, Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=67108864"},
				Ulimits: []enginespec.Ulimit{{Name: "fsize", Soft: 64 << 20, Hard: 64 << 20}, nofile}},
		},
		"read-only root, /tmp half the memory": {
			disk: "10Gi", how: afev1.DiskReadOnlyRoot,
			want: limits{ReadOnlyRootfs: true, Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=134217728"},
				Ulimits: []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
		},
		"cpuSeconds: SIGXCPU at the limit, SIGKILL a second later": {
			how: afev1.DiskReadOnlyRoot, cpuSeconds: 2,
			want: limits{Ulimits: []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile, {Name: "cpu", Soft: 2, Hard: 3}}},
		},
		"storage quota: a writable root the engine limits": {
			disk: "2Gi", how: afev1.DiskStorageQuota,
			want: limits{StorageSizeBytes: 2 << 30, Ulimits: []enginespec.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := testSandbox()
			sbx.Spec.Resources.Memory = ptr.To(resource.MustParse("256Mi"))
			sbx.Spec.Resources.FileSize = ptr.To(resource.MustParse("1Gi"))
			sbx.Spec.Resources.OpenFiles = 4096
			sbx.Spec.Resources.CPUSeconds = tc.cpuSeconds
			if tc.disk != "" {
				sbx.Spec.Resources.Disk = ptr.To(resource.MustParse(tc.disk))
			}
			c := Container(sbx, IdentityOf(sbx, "default"), Resolved{Workspace: "v", DiskEnforcement: tc.how})
			got := limits{ReadOnlyRootfs: c.ReadOnlyRootfs, Tmpfs: c.Tmpfs, StorageSizeBytes: c.StorageSizeBytes, Ulimits: c.Ulimits}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// The logs the engine keeps of a sandbox and its proxy are bounded, more
// tightly under a small resources.disk, and their bound is what counts
// against it.
func TestLogBounds(t *testing.T) {
	tests := map[string]struct {
		disk            string
		egress          bool
		sandbox, proxy  int64 // the size of each of two files
		reserveAtMostOf int64 // the reserve is at most this part of the disk
	}{
		"no disk limit":          {sandbox: 512 << 10, proxy: 2 << 20},
		"16Mi":                   {disk: "16Mi", sandbox: 512 << 10, proxy: 512 << 10, reserveAtMostOf: 8},
		"16Mi with egress":       {disk: "16Mi", egress: true, sandbox: 512 << 10, proxy: 512 << 10, reserveAtMostOf: 7},
		"1Mi, the smallest":      {disk: "1Mi", egress: true, sandbox: 64 << 10, proxy: 64 << 10, reserveAtMostOf: 3},
		"1Gi: the usual sizes":   {disk: "1Gi", egress: true, sandbox: 512 << 10, proxy: 2 << 20, reserveAtMostOf: 100},
		"64Mi: a proxy of 2 MiB": {disk: "64Mi", sandbox: 512 << 10, proxy: 2 << 20, reserveAtMostOf: 20},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := testSandbox()
			if tc.disk != "" {
				sbx.Spec.Resources.Disk = ptr.To(resource.MustParse(tc.disk))
			}
			if tc.egress {
				sbx.Spec.Egress = []afev1.EgressHost{"example.com"}
			}
			id := IdentityOf(sbx, "default")
			c, p := Container(sbx, id, Resolved{}), Proxy(sbx, id, ProxyOptions{}, Allowlist{})
			if d := cmp.Diff(&enginespec.LogConfig{MaxFileBytes: tc.sandbox, Files: 2}, c.Log); d != "" {
				t.Errorf("sandbox: %s", d)
			}
			if d := cmp.Diff(&enginespec.LogConfig{MaxFileBytes: tc.proxy, Files: 2}, p.Log); d != "" {
				t.Errorf("proxy: %s", d)
			}
			want := c.Log.Bound()
			if tc.egress {
				want += p.Log.Bound()
			}
			if got := LogReserve(sbx); got != want {
				t.Errorf("reserve %d, want %d", got, want)
			}
			if tc.disk != "" && LogReserve(sbx)*tc.reserveAtMostOf > sbx.Spec.Resources.Disk.Value() {
				t.Errorf("reserve %d is more than 1/%d of %s", LogReserve(sbx), tc.reserveAtMostOf, tc.disk)
			}
		})
	}
}
