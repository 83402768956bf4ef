package docker

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// hostCgroups reads a container's usage from the cgroup files of the engine's
// host, where the controller sees them (a local engine, the controller on its
// host): no request to the engine at all. Any file that cannot be read, or
// that is not the container's, makes the caller ask the engine instead.
type hostCgroups struct {
	// root is where the cgroup hierarchies are mounted (/sys/fs/cgroup).
	root string
	// proc is the process filesystem (/proc), for a container's network.
	proc string
}

// localCgroups returns the reader of the host's cgroups for a local engine,
// or nil.
func localCgroups(local bool) *hostCgroups {
	if !local {
		return nil
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return nil
	}
	return &hostCgroups{root: "/sys/fs/cgroup", proc: "/proc"}
}

// usage reads the usage of the container with the full ID id; false when it
// cannot be read here.
func (h *hostCgroups) usage(id string) (*ContainerUsage, bool) {
	if h == nil || len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, false
	}
	if _, err := os.Stat(filepath.Join(h.root, "cgroup.controllers")); err == nil {
		return h.usageV2(id)
	}
	return h.usageV1(id)
}

// Where the engine's cgroupfs and systemd drivers put a container.
func containerCgroups(id string) []string {
	return []string{filepath.Join("docker", id), filepath.Join("system.slice", "docker-"+id+".scope")}
}

func (h *hostCgroups) usageV1(id string) (*ContainerUsage, bool) {
	for _, dir := range containerCgroups(id) {
		cpu := filepath.Join(h.root, "cpuacct", dir)
		ns, ok := readInt(filepath.Join(cpu, "cpuacct.usage"))
		if !ok {
			continue
		}
		mem := filepath.Join(h.root, "memory", dir)
		used, ok := readInt(filepath.Join(mem, "memory.usage_in_bytes"))
		if !ok {
			return nil, false
		}
		u := &ContainerUsage{CPUNanoseconds: ns, MemoryBytes: workingSet(used, statValue(filepath.Join(mem, "memory.stat"), "total_inactive_file"))}
		if !h.network(id, cpu, u) {
			return nil, false
		}
		return u, true
	}
	return nil, false
}

func (h *hostCgroups) usageV2(id string) (*ContainerUsage, bool) {
	for _, dir := range containerCgroups(id) {
		cg := filepath.Join(h.root, dir)
		usec, ok := statLine(filepath.Join(cg, "cpu.stat"), "usage_usec")
		if !ok {
			continue
		}
		used, ok := readInt(filepath.Join(cg, "memory.current"))
		if !ok {
			return nil, false
		}
		u := &ContainerUsage{CPUNanoseconds: usec * 1000, MemoryBytes: workingSet(used, statValue(filepath.Join(cg, "memory.stat"), "inactive_file"))}
		if !h.network(id, cg, u) {
			return nil, false
		}
		return u, true
	}
	return nil, false
}

// network sums the bytes of the container's interfaces but lo, as the
// engine does, from a process of the container's cgroup dir, which must be
// the container's in this process's view of /proc too (a controller in
// another pid namespace sees other processes under those numbers).
func (h *hostCgroups) network(id, dir string, u *ContainerUsage) bool {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	pid, _, _ := strings.Cut(string(procs), "\n")
	if _, err := strconv.Atoi(pid); err != nil {
		return false
	}
	cg, err := os.ReadFile(filepath.Join(h.proc, pid, "cgroup"))
	if err != nil || !bytes.Contains(cg, []byte(id)) {
		return false
	}
	dev, err := os.ReadFile(filepath.Join(h.proc, pid, "net", "dev"))
	if err != nil {
		return false
	}
	rx, tx, ok := netDev(dev)
	u.NetworkReceiveBytes, u.NetworkTransmitBytes = rx, tx
	return ok
}

// netDev sums the received and sent bytes of /proc/net/dev but lo's.
func netDev(dev []byte) (rx, tx uint64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(dev))
	for i := 0; sc.Scan(); i++ {
		if i < 2 {
			continue // the two header lines
		}
		name, rest, found := strings.Cut(sc.Text(), ":")
		if !found {
			return 0, 0, false
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, false
		}
		if strings.TrimSpace(name) == "lo" {
			continue
		}
		r, err1 := strconv.ParseUint(f[0], 10, 64)
		t, err2 := strconv.ParseUint(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		rx, tx = rx+r, tx+t
	}
	return rx, tx, sc.Err() == nil
}

func workingSet(used, inactive uint64) uint64 {
	if inactive < used {
		return used - inactive
	}
	return used
}

func readInt(file string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// statLine is the value of key in a "key value" per line file.
func statLine(file, key string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// statValue is statLine's value, or 0.
func statValue(file, key string) uint64 {
	v, _ := statLine(file, key)
	return v
}
