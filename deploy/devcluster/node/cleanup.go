package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimSocketDir is where containerd 1.6's shims put their sockets whatever
// containerd's state dir is.
const shimSocketDir = "/run/containerd/s"

// legacyLogDir is where the kubelet links container logs, whatever podLogsDir is.
const legacyLogDir = "/var/log/containers"

// cniCacheDir is where libcni (in containerd) caches results, whatever the
// CNI config says.
const cniCacheDir = "/var/lib/cni"

// cleanup removes what a node leaves outside its processes, whether it was
// stopped or killed: every process of its pods (by cgroup), its shims (by
// containerd address), containerd and kubelet (by config path); every mount
// under STATE/node (overlay rootfs, sandbox shm, netns, the kubelet's
// volumes and its rshared root dir); its cgroups; the bridge; the NAT rule;
// the sysctls it changed; the kubelet's links in /var/log/containers;
// libcni's cached results in /var/lib/cni; stale shim sockets in
// /run/containerd/s; and STATE/node itself (the logs
// stay in STATE/logs). Idempotent; it returns what it could not undo.
func cleanup(p paths) []error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var left []int
	for i := 0; i < 100; i++ {
		if left = nodeProcesses(p); len(left) == 0 {
			break
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		add(fmt.Errorf("processes %v survive SIGKILL", left))
	}
	add(unmountUnder(p.node))
	add(removeCgroupRoot())
	if exec.Command("ip", "link", "show", bridgeName).Run() == nil {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			add(fmt.Errorf("ip link delete %s: %v: %s", bridgeName, err, strings.TrimSpace(string(out))))
		}
	}
	add(removeServiceNAT(p))
	add(restoreSysctls(p))
	add(removeLogLinks(p))
	add(removeCNICache(p))
	add(removeStaleShimSockets())
	if len(errs) == 0 {
		if _, err := os.Stat(p.node); err == nil {
			if mounts := mountsUnder(p.node); len(mounts) > 0 {
				add(fmt.Errorf("not removing %s: still mounted: %v", p.node, mounts))
			} else {
				add(os.RemoveAll(p.node))
			}
		}
	}
	return errs
}

// nodeProcesses lists the live processes that belong to the node of p.
func nodeProcesses(p paths) []int {
	self := os.Getpid()
	set := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					set[pid] = true
				}
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		base := filepath.Base(args[0])
		for i, a := range args {
			ours := false
			switch {
			case strings.HasPrefix(base, "containerd-shim") && a == "-address" && i+1 < len(args) && args[i+1] == p.sock():
				ours = true
			case base == "containerd" && a == p.containerdConfig():
				ours = true
			case base == "kubelet" && a == "--config="+p.kubeletConfig():
				ours = true
			}
			if ours {
				set[pid] = true
			}
		}
	}
	var pids []int
	for pid := range set {
		if pid != self && alive(pid) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := unescapeMount(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unmountUnder detaches every mount at or below dir, deepest first, until
// none is left (mounts may be stacked).
func unmountUnder(dir string) error {
	for round := 0; round < 20; round++ {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	return fmt.Errorf("still mounted: %v", mountsUnder(dir))
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroupRoot removes the pods' cgroup parent and everything below it
// in every hierarchy, deepest first.
func removeCgroupRoot() error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for i := 0; i < 50; i++ {
				// A cgroup whose last task just died may be busy for a moment.
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

func removeLogLinks(p paths) error {
	entries, err := os.ReadDir(legacyLogDir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		link := filepath.Join(legacyLogDir, e.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, p.node+"/") {
			if err := os.Remove(link); err != nil {
				return err
			}
		}
	}
	// The kubelet made the directory if no one else had.
	if _, err := os.Stat(filepath.Join(p.node, "made-var-log-containers")); err == nil {
		if rest, _ := os.ReadDir(legacyLogDir); len(rest) == 0 {
			_ = os.Remove(legacyLogDir)
		}
	}
	return nil
}

// removeStaleShimSockets removes the sockets in /run/containerd/s that no
// process listens on any more (a killed shim's), and the directories if
// that leaves them empty; a live containerd's are left alone.
func removeStaleShimSockets() error {
	entries, err := os.ReadDir(shimSocketDir)
	if err != nil {
		return nil
	}
	listening := map[string]bool{}
	if data, err := os.ReadFile("/proc/net/unix"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 8 {
				listening[f[7]] = true
			}
		}
	}
	for _, e := range entries {
		path := filepath.Join(shimSocketDir, e.Name())
		if e.Type()&fs.ModeSocket != 0 && !listening[path] {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	if rest, _ := os.ReadDir(shimSocketDir); len(rest) == 0 {
		_ = os.Remove(shimSocketDir)
		if rest, _ := os.ReadDir(filepath.Dir(shimSocketDir)); len(rest) == 0 {
			_ = os.Remove(filepath.Dir(shimSocketDir))
		}
	}
	return nil
}

// removeCNICache removes libcni's cached results of this node's network
// (deleted by CNI DEL already, unless the node was killed), and the
// directories if this node made them.
func removeCNICache(p paths) error {
	results := filepath.Join(cniCacheDir, "results")
	_, err := os.Stat(filepath.Join(p.node, "made-var-lib-cni"))
	made := err == nil
	entries, _ := os.ReadDir(results)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "devcluster-") || (made && strings.HasPrefix(e.Name(), "cni-loopback-")) {
			if err := os.Remove(filepath.Join(results, e.Name())); err != nil {
				return err
			}
		}
	}
	if made {
		for _, d := range []string{results, cniCacheDir} {
			if rest, err := os.ReadDir(d); err == nil && len(rest) == 0 {
				_ = os.Remove(d)
			}
		}
	}
	return nil
}
