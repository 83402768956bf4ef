package builtin

import (
	"strconv"
	"strings"
)

// SnapshotVolume is the name of a sandbox's n-th snapshot volume.
func SnapshotVolume(key string, n int) string { return "afe-" + key + "-snap-" + strconv.Itoa(n) }

// SnapshotNumber is n of a sandbox's snapshot volume name, 0 when the name
// is not one of its snapshots.
func SnapshotNumber(key, volume string) int {
	s, ok := strings.CutPrefix(volume, "afe-"+key+"-snap-")
	if !ok || s == "" || len(s) > 9 || s[0] == '0' {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// NextSnapshot is the number after the highest of the names.
func NextSnapshot(key string, volumes []string) int {
	n := 0
	for _, v := range volumes {
		n = max(n, SnapshotNumber(key, v))
	}
	return n + 1
}

// CopyHelper is the name prefix of the containers that copy a workspace for
// the volume (never started; removed after the copy).
func CopyHelper(volume string) string { return volume + "-copy" }
