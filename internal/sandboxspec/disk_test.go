package sandboxspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

func TestDiskLimit(t *testing.T) {
	// What of the container spec resources.disk decides.
	type limits struct {
		ReadOnlyRootfs   bool
		Tmpfs            map[string]string
		StorageSizeBytes int64
		Ulimits          []docker.Ulimit
	}
	nofile := docker.Ulimit{Name: "nofile", Soft: 4096, Hard: 4096}
	tests := map[string]struct {
		disk       string
		how        afev1.DiskEnforcement
		cpuSeconds int64
		want       limits
	}{
		"no disk limit: as before, a writable root": {
			how:  afev1.DiskReadOnlyRoot,
			want: limits{Ulimits: []docker.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
		},
		"read-only root, /tmp the limit": {
			disk: "64Mi", how: afev1.DiskReadOnlyRoot,
			want: limits{ReadOnlyRootfs: true, Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=67108864"},
				Ulimits: []docker.Ulimit{{Name: "fsize", Soft: 64 << 20, Hard: 64 << 20}, nofile}},
		},
		"read-only root, /tmp half the memory": {
			disk: "10Gi", how: afev1.DiskReadOnlyRoot,
			want: limits{ReadOnlyRootfs: true, Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=134217728"},
				Ulimits: []docker.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
		},
		"cpuSeconds: SIGXCPU at the limit, SIGKILL a second later": {
			how: afev1.DiskReadOnlyRoot, cpuSeconds: 2,
			want: limits{Ulimits: []docker.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile, {Name: "cpu", Soft: 2, Hard: 3}}},
		},
		"storage quota: a writable root the engine limits": {
			disk: "2Gi", how: afev1.DiskStorageQuota,
			want: limits{StorageSizeBytes: 2 << 30, Ulimits: []docker.Ulimit{{Name: "fsize", Soft: 1 << 30, Hard: 1 << 30}, nofile}},
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
