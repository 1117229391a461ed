// Command devcluster-node runs a real Kubernetes node attached to a running
// devcluster: containerd and runc (from the machine's packages), a kubelet
// built from the control plane's own Kubernetes release, a bridge CNI
// network, and a pause image made here (no registry is needed).
//
//	devcluster-node up --dir STATE --bin BIN [--name real-node-0] [--node-ip IP] [--ready-timeout D]
//	devcluster-node import --dir STATE ARCHIVE...
//	devcluster-node cleanup --dir STATE
//	devcluster-node image --ref REF --add SRC=/DEST... [--entrypoint ARG]... -o OUT
//
// `up` runs in the foreground (node.sh starts it in the background) until
// SIGTERM/SIGINT or until the cluster's `devcluster up` process exits, then
// stops the kubelet, the pods, containerd and its shims, and removes what
// they left (mounts, cgroups, the bridge, runtime state, changed sysctls).
// `cleanup` does the removal part alone, for a node whose `up` was killed.
// Only one node runs per machine: the cgroups, sysctls and the shims'
// /run/containerd are the machine's.
package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// Label and taint (NoSchedule) of the real node: only pods that select
	// the label and tolerate the taint run there, so the other tests' pods
	// stay on the fake nodes.
	realNodeKey = "operator-host.dev/real-node"
	// The pod sandbox image, imported from BIN/pause.tar at start.
	pauseImage = "localhost/devcluster/pause:1"
	// Machine-wide: one real node per machine.
	lockPath = "/run/devcluster-node.lock"
	// Cgroup parent of every pod (kubelet cgroupRoot), in each hierarchy.
	cgroupRoot = "devcluster-node"
	bridgeName = "devcluster0"
	podSubnet  = "10.89.0.0/24"
	// The service IP of the apiserver (first of --service-cluster-ip-range
	// in ../main.go); pods reach it through DNAT rules (natRules).
	apiserverServiceIP = "10.96.0.1"
)

func main() {
	// Children get Pdeathsig, which fires when the forking *thread* exits:
	// fork only from the main goroutine, locked to the main thread.
	runtime.LockOSThread()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		fs := flag.NewFlagSet("up", flag.ExitOnError)
		dir := fs.String("dir", "", "the devcluster's state directory")
		bin := fs.String("bin", "", "directory of kubelet and pause.tar (node/build.sh's output)")
		name := fs.String("name", "real-node-0", "node name")
		nodeIP := fs.String("node-ip", "", "node IP (default: the source address of the default route)")
		readyTimeout := fs.Duration("ready-timeout", 3*time.Minute, "give up if the node is not Ready by then")
		_ = fs.Parse(os.Args[2:])
		if *dir == "" || *bin == "" {
			usage()
		}
		err = up(newPaths(*dir), *bin, *name, *nodeIP, *readyTimeout)
	case "cleanup":
		fs := flag.NewFlagSet("cleanup", flag.ExitOnError)
		dir := fs.String("dir", "", "the devcluster's state directory")
		_ = fs.Parse(os.Args[2:])
		if *dir == "" {
			usage()
		}
		p := newPaths(*dir)
		var lock *os.File
		if lock, err = takeLock(p); err == nil {
			errs := cleanup(p)
			lock.Close()
			err = errors.Join(errs...)
		}
	case "import":
		fs := flag.NewFlagSet("import", flag.ExitOnError)
		dir := fs.String("dir", "", "the devcluster's state directory")
		_ = fs.Parse(os.Args[2:])
		if *dir == "" || fs.NArg() == 0 {
			usage()
		}
		for _, a := range fs.Args() {
			if err = importImage(newPaths(*dir), a); err != nil {
				break
			}
		}
	case "image":
		err = imageMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: devcluster-node up --dir STATE --bin BIN [--name NAME] [--node-ip IP] [--ready-timeout D]
       devcluster-node import --dir STATE ARCHIVE...
       devcluster-node cleanup --dir STATE
       devcluster-node image --ref REF --add SRC=/DEST... [--entrypoint ARG]... [--env K=V]... [--user U] -o OUT`)
	os.Exit(2)
}

var started = time.Now()

func logf(format string, args ...any) {
	fmt.Printf("[devcluster-node %6.2fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

// paths of one node: everything it writes is under STATE/node, apart from
// what the kernel, containerd's shims and the kubelet keep elsewhere (see
// cleanup).
type paths struct {
	dir, node string
}

func newPaths(dir string) paths {
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	return paths{dir: dir, node: filepath.Join(dir, "node")}
}

func (p paths) sock() string             { return filepath.Join(p.node, "containerd.sock") }
func (p paths) containerdConfig() string { return filepath.Join(p.node, "containerd.toml") }
func (p paths) kubeletConfig() string    { return filepath.Join(p.node, "kubelet.yaml") }
func (p paths) sysctlsSaved() string     { return filepath.Join(p.node, "sysctls.json") }
func (p paths) natRule() string          { return filepath.Join(p.node, "nat-rule.json") }
func (p paths) readyFile() string        { return filepath.Join(p.node, "node.json") }
func (p paths) log(name string) string   { return filepath.Join(p.dir, "logs", name+".log") }

// takeLock holds the machine's real-node lock (released when the process
// exits); it fails at once, naming the holder, if another node has it.
func takeLock(p paths) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(lockPath)
		f.Close()
		return nil, fmt.Errorf("another real node runs on this machine (one per machine: cgroups, sysctls and /run/containerd are shared): %s holds %s",
			strings.TrimSpace(string(holder)), lockPath)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d, state dir %s\n", os.Getpid(), p.dir)), 0)
	return f, nil
}

// prerequisites names what is missing, with what to install.
func prerequisites() error {
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir(), p)); err != nil {
			missing = append(missing, "CNI plugin "+p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s; install them with: apt-get install -y --no-install-recommends containerd runc containernetworking-plugins",
			strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (containerd, runc, cgroups, mounts)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("missing the ip command (apt-get install -y iproute2)")
	}
	return nil
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins
// (/usr/lib/cni), or the upstream default /opt/cni/bin.
func cniBinDir() string {
	for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			return d
		}
	}
	return "/usr/lib/cni"
}

type clusterState struct {
	Server string         `json:"server"`
	Ports  map[string]int `json:"ports"`
}

// nodeState is written to STATE/node/node.json once the node is Ready.
type nodeState struct {
	PID          int                `json:"pid"`
	Name         string             `json:"name"`
	NodeIP       string             `json:"nodeIP"`
	Children     map[string]int     `json:"children"`
	Ports        map[string]int     `json:"ports"`
	Socket       string             `json:"containerdSocket"`
	ReadySeconds float64            `json:"readySeconds"`
	Steps        map[string]float64 `json:"stepSeconds"`
}

func up(p paths, bin, name, nodeIP string, readyTimeout time.Duration) (err error) {
	lock, err := takeLock(p)
	if err != nil {
		return err
	}
	defer lock.Close()
	// node.sh wrote the pid file; it goes with this process.
	defer func() {
		if pid, _ := os.ReadFile(filepath.Join(p.dir, "node.pid")); strings.TrimSpace(string(pid)) == strconv.Itoa(os.Getpid()) {
			_ = os.Remove(filepath.Join(p.dir, "node.pid"))
		}
	}()
	if err := prerequisites(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()

	var cs clusterState
	data, err := os.ReadFile(filepath.Join(p.dir, "state.json"))
	if err == nil {
		err = json.Unmarshal(data, &cs)
	}
	if err != nil || cs.Server == "" {
		return fmt.Errorf("no ready devcluster in %s (start it with deploy/devcluster/start.sh): %v", p.dir, err)
	}
	clusterPID, err := readPID(filepath.Join(p.dir, "devcluster.pid"))
	if err != nil {
		return fmt.Errorf("no devcluster running in %s: %w", p.dir, err)
	}
	adminCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("the devcluster in %s is not ready: %w", p.dir, err)
	}
	client, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return err
	}

	// Whatever a killed run left behind goes first.
	if errs := cleanup(p); len(errs) > 0 {
		return fmt.Errorf("cleaning up a previous node: %w", errors.Join(errs...))
	}
	if len(p.sock()) > 100 {
		return fmt.Errorf("state dir %s is too long for containerd's unix socket %s (max 107 bytes)", p.dir, p.sock())
	}
	pkiDir := filepath.Join(p.node, "pki")
	for _, d := range []string{pkiDir, filepath.Join(p.node, "cni", "net.d"), filepath.Join(p.dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}

	if nodeIP == "" {
		if nodeIP, err = defaultNodeIP(); err != nil {
			return err
		}
	}
	ports, err := freePorts("kubelet", "kubelet-healthz")
	if err != nil {
		return err
	}
	steps := map[string]float64{}
	step := func(what string) {
		steps[what] = time.Since(started).Seconds()
		logf("%s", what)
	}

	// Certificates from the devcluster's CA: the kubelet's client identity
	// (the Node authorizer and NodeRestriction know it by this subject) and
	// its serving certificate, which the apiserver checks
	// (--kubelet-certificate-authority in ../main.go).
	ca, err := loadCA(filepath.Join(p.dir, "pki"))
	if err != nil {
		return fmt.Errorf("the devcluster CA: %w", err)
	}
	if err := ca.issue(pkiDir, "kubelet-client", pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	if err := ca.issue(pkiDir, "kubelet-serving", pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		x509.ExtKeyUsageServerAuth, []string{name, "localhost"}, []net.IP{net.ParseIP(nodeIP), net.ParseIP("127.0.0.1")}); err != nil {
		return err
	}
	kubeletKubeconfig := filepath.Join(p.node, "kubelet.kubeconfig")
	if err := writeKubeconfig(kubeletKubeconfig, cs.Server, filepath.Join(p.dir, "pki", "ca.crt"),
		filepath.Join(pkiDir, "kubelet-client.crt"), filepath.Join(pkiDir, "kubelet-client.key")); err != nil {
		return err
	}

	if err := writeContainerdConfig(p); err != nil {
		return err
	}
	if err := writeCNIConfig(p); err != nil {
		return err
	}
	if err := makeBridge(); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	if err := makeCgroupRoot(); err != nil {
		return fmt.Errorf("cgroup root: %w", err)
	}
	if err := writeKubeletConfig(p, nodeIP, ports); err != nil {
		return err
	}
	// The kubelet sets vm.overcommit_memory, kernel.panic and
	// kernel.panic_on_oops, the bridge plugin net.ipv4.ip_forward: saved
	// here, put back by cleanup.
	if err := saveSysctls(p); err != nil {
		return err
	}
	// The kubelet and libcni make these if missing; cleanup removes them then.
	for marker, d := range map[string]string{"made-var-log-containers": legacyLogDir, "made-var-lib-cni": cniCacheDir} {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			_ = os.WriteFile(filepath.Join(p.node, marker), nil, 0o644)
		}
	}

	n := &node{p: p, client: client, name: name, children: map[string]*child{}}
	defer n.teardown()

	if err := n.start("containerd", "containerd", "--config", p.containerdConfig()); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "containerd", 30*time.Second, func() error {
		return exec.Command("ctr", "--address", p.sock(), "version").Run()
	}); err != nil {
		return err
	}
	step("containerd ready")
	if err := ctr(p, "images", "import", filepath.Join(bin, "pause.tar")); err != nil {
		return fmt.Errorf("importing the pause image: %w", err)
	}
	step("pause image imported")

	if err := n.start("kubelet", filepath.Join(bin, "kubelet"),
		"--config="+p.kubeletConfig(),
		"--kubeconfig="+kubeletKubeconfig,
		"--hostname-override="+name,
		"--node-ip="+nodeIP,
		"--node-labels="+realNodeKey+"=true",
		"--root-dir="+filepath.Join(p.node, "kubelet"),
		"--cert-dir="+filepath.Join(p.node, "kubelet", "pki"),
		"--v=1",
	); err != nil {
		return err
	}
	step("kubelet started")
	if err := addServiceNAT(p, cs.Ports["apiserver"]); err != nil {
		logf("warning: pods cannot reach the apiserver at %s:443 (the kubernetes Service): %v", apiserverServiceIP, err)
	}

	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := n.waitFor(readyCtx, "node "+name+" Ready", readyTimeout, func() error {
		node, err := client.CoreV1().Nodes().Get(readyCtx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return err
	}
	step("node Ready")

	st := nodeState{PID: os.Getpid(), Name: name, NodeIP: nodeIP, Children: n.pids(), Ports: ports,
		Socket: p.sock(), ReadySeconds: time.Since(started).Seconds(), Steps: steps}
	data, err = json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.readyFile(), append(data, '\n'), 0o644); err != nil {
		return err
	}
	logf("ready: node %s (%s) in %.1fs; kubelet on %s:%d", name, nodeIP, st.ReadySeconds, nodeIP, ports["kubelet"])

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logf("stopping on signal")
			return nil
		case c := <-n.died:
			return fmt.Errorf("%s exited unexpectedly (see %s)", c, p.log(c))
		case <-tick.C:
			if !alive(clusterPID) {
				logf("the devcluster (pid %d) has exited; stopping", clusterPID)
				return nil
			}
		}
	}
}

// node holds the running children of up.
type node struct {
	p        paths
	client   kubernetes.Interface
	name     string
	children map[string]*child
	order    []string
	died     chan string
}

type child struct {
	cmd      *exec.Cmd
	done     chan struct{}
	stopping bool
}

func (n *node) start(name, path string, args ...string) error {
	if n.died == nil {
		n.died = make(chan string, 4)
	}
	logFile, err := os.OpenFile(n.p.log(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf("started %s (pid %d): %s %s", name, cmd.Process.Pid, path, strings.Join(args, " "))
	c := &child{cmd: cmd, done: make(chan struct{})}
	n.children[name] = c
	n.order = append(n.order, name)
	go func() {
		err := cmd.Wait()
		logFile.Close()
		close(c.done)
		if !c.stopping {
			logf("%s exited: %v", name, err)
			n.died <- name
		}
	}()
	return nil
}

func (n *node) pids() map[string]int {
	m := map[string]int{}
	for name, c := range n.children {
		m[name] = c.cmd.Process.Pid
	}
	return m
}

// waitFor polls cond every 100 ms until it succeeds, a child dies, or the
// timeout passes.
func (n *node) waitFor(ctx context.Context, what string, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case c := <-n.died:
			n.died <- c
			return fmt.Errorf("%s exited while waiting for %s (see %s)", c, what, n.p.log(c))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s (last error: %v)", what, timeout, last)
		}
	}
}

func (n *node) stop(name string, grace time.Duration) {
	c := n.children[name]
	if c == nil {
		return
	}
	c.stopping = true
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		logf("%s did not stop in %s; killing it", name, grace)
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// teardown stops the node: the kubelet first (so it neither restarts pods
// nor registers the Node again), then the Node object, the pods (through
// CRI, so CNI and containerd release what they hold), containerd, and
// finally cleanup for whatever is left.
func (n *node) teardown() {
	_ = os.Remove(n.p.readyFile())
	for _, c := range n.children {
		c.stopping = true
	}
	n.stop("kubelet", 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := n.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		logf("deleting node %s: %v (the cluster may be gone)", n.name, err)
	}
	if c := n.children["containerd"]; c != nil {
		select {
		case <-c.done:
		default:
			if err := removeAllPods(n.p.sock(), 30*time.Second); err != nil {
				logf("removing pods through CRI: %v", err)
			}
		}
	}
	n.stop("containerd", 10*time.Second)
	if errs := cleanup(n.p); len(errs) > 0 {
		logf("cleanup: %v", errors.Join(errs...))
	}
	logf("stopped")
}

func readPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, err
	}
	if !alive(pid) {
		return 0, fmt.Errorf("pid %d is not running", pid)
	}
	return pid, nil
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// defaultNodeIP is the source address of the default route (the kubelet
// refuses a loopback node IP).
func defaultNodeIP() (string, error) {
	c, err := net.Dial("udp4", "203.0.113.1:9")
	if err == nil {
		defer c.Close()
		if ip := c.LocalAddr().(*net.UDPAddr).IP; !ip.IsLoopback() {
			return ip.String(), nil
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address for the node (pass --node-ip)")
}

func freePorts(names ...string) (map[string]int, error) {
	ports := map[string]int{}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for _, n := range names {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[n] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
