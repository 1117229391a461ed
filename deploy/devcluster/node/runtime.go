package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// writeContainerdConfig: containerd 1.6 with its root, state, socket and
// runc state under STATE/node, the CRI plugin, runc through the v2 shim with
// cgroupfs, and the pause image made by build.sh.
func writeContainerdConfig(p paths) error {
	c := filepath.Join(p.node, "containerd")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Not needed by the CRI plugin; opt would install into /opt/containerd.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  # The VM's capability bounding set lacks CAP_SYS_RESOURCE: even root
  # cannot lower oom_score_adj, and without this every sandbox fails with
  # "runc create failed: ... can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[5]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
    max_conf_num = 1
`, filepath.Join(c, "root"), filepath.Join(c, "state"), p.sock(), pauseImage,
		filepath.Join(c, "runc"), cniBinDir(), filepath.Join(p.node, "cni", "net.d"))
	return os.WriteFile(p.containerdConfig(), []byte(cfg), 0o644)
}

// writeCNIConfig: a bridge network for pods that do not use the host's.
// Even a node that only runs hostNetwork pods needs one, or it stays
// NotReady ("cni plugin not initialized"). No masquerading: the plugin adds
// nothing to the host's iptables.
func writeCNIConfig(p paths) error {
	cfg := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "devcluster",
		"plugins": []map[string]any{
			{
				"type":        "bridge",
				"bridge":      bridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podSubnet}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(p.node, "cni", "ipam"),
				},
			},
			{"type": "loopback"},
		},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.node, "cni", "net.d", "10-devcluster.conflist"), data, 0o644)
}

func writeKubeletConfig(p paths, nodeIP string, ports map[string]int) error {
	pki := filepath.Join(p.node, "pki")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on these machines: kubelet 1.35 refuses it unless told otherwise
# ("kubelet is configured to not run on a host using cgroup v1").
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
containerRuntimeEndpoint: unix://%[2]s
imageServiceEndpoint: unix://%[2]s
address: %[3]s
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
tlsCertFile: %[6]s/kubelet-serving.crt
tlsPrivateKeyFile: %[6]s/kubelet-serving.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[7]s
authorization:
  mode: Webhook
registerNode: true
registerWithTaints:
- key: %[8]s
  value: "true"
  effect: NoSchedule
podLogsDir: %[9]s
# false: the kubelet sets vm.overcommit_memory=1, kernel.panic=10 and
# kernel.panic_on_oops=1 (true would make it refuse to start, as this
# machine has other values); devcluster-node puts them back when it stops.
protectKernelDefaults: false
makeIPTablesUtilChains: false
failSwapOn: true
# No cluster DNS: pods use the host's resolver.
resolvConf: /etc/resolv.conf
# The machine's disk may be fuller than the defaults allow (imagefs.available
# 15%% would taint the node with DiskPressure and evict its pods), and the
# images are imported, not pulled: nothing is to be evicted or collected.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
  imagefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, cgroupRoot, p.sock(), nodeIP, ports["kubelet"], ports["kubelet-healthz"], pki,
		filepath.Join(p.dir, "pki", "ca.crt"), realNodeKey, filepath.Join(p.node, "pod-logs"))
	return os.WriteFile(p.kubeletConfig(), []byte(cfg), 0o644)
}

func writeKubeconfig(path, server, caFile, certFile, keyFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "devcluster", AuthInfo: "kubelet"}
	cfg.CurrentContext = "kubelet"
	return clientcmd.WriteToFile(*cfg, path)
}

// cgroupHierarchies lists the mounted cgroup hierarchies under /sys/fs/cgroup
// (each v1 controller, name=systemd, the v2 unified one).
func cgroupHierarchies() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 {
			continue
		}
		if fstype := f[sep+1]; (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(f[4], "/sys/fs/cgroup") {
			dirs = append(dirs, unescapeMount(f[4]))
		}
	}
	return dirs
}

// makeCgroupRoot creates the pods' cgroup parent in every hierarchy (the
// kubelet checks that its cgroupRoot exists in each), so that cleanup
// removes exactly what this node made and nothing of anyone else's.
func makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, cgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		// A new v1 cpuset has no CPUs or memory nodes: no task could join.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if _, err := os.Stat(filepath.Join(h, f)); err == nil {
				if v, _ := os.ReadFile(filepath.Join(d, f)); len(bytes.TrimSpace(v)) == 0 {
					parent, err := os.ReadFile(filepath.Join(h, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(d, f), parent, 0o644); err != nil {
						return fmt.Errorf("%s: %w", filepath.Join(d, f), err)
					}
				}
			}
		}
		// cgroup v2 as the only hierarchy: hand the controllers down.
		if h == "/sys/fs/cgroup" {
			if ctrls, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil {
				var enable []string
				for _, c := range strings.Fields(string(ctrls)) {
					enable = append(enable, "+"+c)
				}
				_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644)
			}
		}
	}
	return nil
}

// Sysctls the kubelet (protectKernelDefaults: false) and the bridge plugin
// change.
var savedSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

func saveSysctls(p paths) error {
	if _, err := os.Stat(p.sysctlsSaved()); err == nil {
		return nil // a previous run's values, not yet put back: keep those
	}
	vals := map[string]string{}
	for _, k := range savedSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		vals[k] = strings.TrimSpace(string(v))
	}
	data, err := json.Marshal(vals)
	if err != nil {
		return err
	}
	return writeFileAtomic(p.sysctlsSaved(), data, 0o644)
}

func restoreSysctls(p paths) error {
	data, err := os.ReadFile(p.sysctlsSaved())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	vals := map[string]string{}
	if err := json.Unmarshal(data, &vals); err != nil {
		return err
	}
	var errs []error
	for k, v := range vals {
		cur, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		if strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return os.Remove(p.sysctlsSaved())
	}
	return errors.Join(errs...)
}

// natRules are the iptables rules (nat table) a real node adds, so that
// in-cluster clients work unchanged without a kube-proxy: connections to
// the kubernetes Service IP go to the apiserver on loopback, from this
// machine (hostNetwork pods: OUTPUT) and from pods on the bridge
// (PREROUTING; DNAT to 127.0.0.1 needs route_localnet on the bridge, see
// makeBridge).
func natRules(port int) [][]string {
	to := []string{"-d", apiserverServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "devcluster-node", "-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(port)}
	return [][]string{
		append([]string{"OUTPUT"}, to...),
		append([]string{"PREROUTING", "-i", bridgeName}, to...),
	}
}

func iptables(op string, rule []string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "nat", op}, rule...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables -t nat %s %s: %v: %s", op, strings.Join(rule, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func addServiceNAT(p paths, port int) error {
	if port == 0 {
		return errors.New("no apiserver port in state.json")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("no iptables command (apt-get install -y iptables)")
	}
	// Recorded first, so that cleanup finds them even if this run is killed.
	if err := writeFileAtomic(p.natRule(), []byte(strconv.Itoa(port)), 0o644); err != nil {
		return err
	}
	for _, r := range natRules(port) {
		if err := iptables("-A", r); err != nil {
			return err
		}
	}
	return nil
}

func removeServiceNAT(p paths) error {
	data, err := os.ReadFile(p.natRule())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return err
	}
	for _, r := range natRules(port) {
		for i := 0; i < 10 && iptables("-C", r) == nil; i++ {
			if err := iptables("-D", r); err != nil {
				return err
			}
		}
	}
	return os.Remove(p.natRule())
}

// makeBridge creates the pods' bridge before the CNI plugin does (it takes
// an existing one), to turn on route_localnet on it alone: pods' connections
// to the Service IP are DNATed to the apiserver on 127.0.0.1.
func makeBridge() error {
	if exec.Command("ip", "link", "show", bridgeName).Run() != nil {
		if out, err := exec.Command("ip", "link", "add", bridgeName, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("ip link add %s type bridge: %v: %s", bridgeName, err, bytes.TrimSpace(out))
		}
	}
	if out, err := exec.Command("ip", "link", "set", bridgeName, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s up: %v: %s", bridgeName, err, bytes.TrimSpace(out))
	}
	return os.WriteFile("/proc/sys/net/ipv4/conf/"+bridgeName+"/route_localnet", []byte("1"), 0o644)
}

// ctr runs ctr against this node's containerd in the CRI's namespace.
func ctr(p paths, args ...string) error {
	cmd := exec.Command("ctr", append([]string{"--address", p.sock(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// importImage imports an image archive (OCI layout or docker save) into the
// node's containerd, where the kubelet finds it (k8s.io namespace, unpacked
// for overlayfs), and checks that the names it carries are there.
func importImage(p paths, archive string) error {
	if _, err := os.Stat(p.readyFile()); err != nil {
		return fmt.Errorf("no real node is running for %s (start it with deploy/devcluster/node.sh start)", p.dir)
	}
	names, bases, err := archiveNames(archive)
	if err != nil {
		return err
	}
	if len(bases) == 0 {
		bases = []string{""}
	}
	for _, b := range bases {
		args := []string{"images", "import"}
		if b != "" {
			args = append(args, "--base-name", b)
		}
		if err := ctr(p, append(args, archive)...); err != nil {
			return err
		}
	}
	out, err := exec.Command("ctr", "--address", p.sock(), "--namespace", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("ctr images ls: %w", err)
	}
	have := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		have[l] = true
	}
	for _, n := range names {
		full := n
		if !strings.Contains(strings.SplitN(n, "/", 2)[0], ".") && !strings.HasPrefix(n, "localhost/") && !strings.Contains(n, "/") {
			full = "docker.io/library/" + n
		}
		if !have[n] && !have[full] {
			return fmt.Errorf("imported %s but containerd has no image %s (it has: %s)", archive, n, strings.Join(strings.Fields(string(out)), ", "))
		}
		fmt.Printf("imported %s\n", n)
	}
	return nil
}

// removeAllPods stops and removes every pod sandbox through CRI: containerd
// then stops their containers, runs CNI DEL, unmounts and deletes the shims.
func removeAllPods(sock string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(list.Items) > 0 {
		logf("removed %d pod sandboxes through CRI", len(list.Items)-len(errs))
	}
	return errors.Join(errs...)
}
