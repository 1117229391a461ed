// Command devcluster runs a local Kubernetes control plane on loopback for
// tests: etcd embedded in this process, and kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (fake nodes) as children.
//
//	devcluster up --dir target/devcluster [--bin DIR] [--nodes 3] [--owner-pid PID]
//	devcluster fault --dir DIR (stop|start|restart) (kube-apiserver|etcd) [--down-for D]
//
// It writes DIR/kubeconfig once the API is ready and the fake nodes are
// Ready, then runs until SIGTERM/SIGINT (or until the owner process exits),
// when it stops every child. Children also die if this process is SIGKILLed
// (Pdeathsig). While it runs, `devcluster fault` stops and starts its
// kube-apiserver or etcd on request (see fault.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `usage: devcluster up --dir DIR [--bin DIR] [--nodes N] [--ready-timeout D] [--owner-pid PID]
       devcluster fault --dir DIR (stop|start|restart) (kube-apiserver|etcd) [--down-for D] [--timeout D]`

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "fault" {
		os.Exit(faultMain(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != "up" {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", "target/devcluster", "state directory (kubeconfig, pki, logs, etcd data)")
	bin := fs.String("bin", "", "directory of kube-apiserver, kube-controller-manager, kube-scheduler, kwok (default: next to this binary)")
	nodes := fs.Int("nodes", 3, "number of fake (kwok) nodes")
	readyTimeout := fs.Duration("ready-timeout", 90*time.Second, "give up if the cluster is not ready by then")
	ownerPID := fs.Int("owner-pid", 0, "stop once the process with this pid has exited (0: run until signalled)")
	_ = fs.Parse(os.Args[2:])

	if err := up(*dir, *bin, *nodes, *readyTimeout, *ownerPID); err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
}

var started = time.Now()

func logf(format string, args ...any) {
	fmt.Printf("[devcluster %6.2fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

// state is written to DIR/state.json so scripts and tests can find the
// processes and ports of this cluster.
type state struct {
	PID       int            `json:"pid"`
	Children  map[string]int `json:"children"`
	Ports     map[string]int `json:"ports"`
	Server    string         `json:"server"`
	Version   string         `json:"version"`
	ReadyTime float64        `json:"readySeconds"`
}

func up(dir, bin string, nodeCount int, readyTimeout time.Duration, ownerPID int) (err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		bin = filepath.Dir(exe)
	}
	for _, d := range []string{"logs", "pki"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	// A stale kubeconfig would make a half-started cluster look ready.
	for _, f := range []string{"kubeconfig", "state.json", faultSocket} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	if err := os.WriteFile(filepath.Join(dir, "devcluster.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if ownerPID > 0 {
		ctx = stopWithOwner(ctx, ownerPID)
	}

	ports, err := freePorts("etcd-client", "etcd-peer", "apiserver")
	if err != nil {
		return err
	}
	st := &state{PID: os.Getpid(), Children: map[string]int{}, Ports: ports,
		Server: fmt.Sprintf("https://127.0.0.1:%d", ports["apiserver"])}

	pkiDir := filepath.Join(dir, "pki")
	if err := writePKI(pkiDir); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	p := func(name string) string { return filepath.Join(pkiDir, name) }

	// etcd: embedded, loopback only, data wiped at start and stop.
	etcdDir := filepath.Join(dir, "etcd-data")
	_ = os.RemoveAll(etcdDir)
	defer os.RemoveAll(etcdDir)
	etcd := &etcdServer{dataDir: etcdDir, logFile: filepath.Join(dir, "logs", "etcd.log"),
		clientPort: ports["etcd-client"], peerPort: ports["etcd-peer"]}
	if err := etcd.start(); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	stopEtcd := etcd.stop
	defer stopEtcd()
	logf("etcd ready on 127.0.0.1:%d", ports["etcd-client"])

	kcfg := func(user string) string { return filepath.Join(pkiDir, user+".kubeconfig") }
	for _, user := range []string{"admin", "controller-manager", "scheduler", "kwok"} {
		if err := writeKubeconfig(kcfg(user), st.Server, p("ca.crt"), p(user+".crt"), p(user+".key")); err != nil {
			return err
		}
	}

	sup := newSupervisor(filepath.Join(dir, "logs"))
	defer sup.stopAll()

	apiserverArgs := []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", ports["etcd-client"]),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports["apiserver"]),
		"--tls-cert-file=" + p("apiserver.crt"),
		"--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.pub"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// Logs, exec and port-forward of pods on a real node (node.sh): the
		// apiserver authenticates to the kubelet with the admin certificate
		// (system:masters, allowed by the kubelet's webhook authorizer), checks
		// the kubelet's serving certificate against the cluster CA, and dials
		// the node's InternalIP (its Hostname address, the node name, does not
		// resolve). The fake nodes serve no kubelet API either way.
		"--kubelet-client-certificate=" + p("admin.crt"),
		"--kubelet-client-key=" + p("admin.key"),
		"--kubelet-certificate-authority=" + p("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// Webhooks and aggregated APIs behind a Service are dialled at a ready
		// endpoint's pod IP, not the ClusterIP: no kube-proxy runs here, and the
		// real node's pod network is reachable from this machine.
		"--enable-aggregator-routing=true",
		"--profiling=false",
		// Flow control bootstrapping only slows a single-user test cluster.
		"--enable-priority-and-fairness=false",
		"--v=1",
	}
	if err := sup.start(ctx, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), apiserverArgs); err != nil {
		return err
	}

	adminCfg, err := clientcmd.BuildConfigFromFlags("", kcfg("admin"))
	if err != nil {
		return err
	}
	adminCfg.QPS, adminCfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return err
	}

	readyCtx, cancelReady := context.WithTimeout(ctx, readyTimeout)
	defer cancelReady()
	wait := func(what string, cond func(context.Context) (bool, error)) error {
		var last error
		for {
			ok, err := cond(readyCtx)
			if ok {
				logf("%s", what)
				return nil
			}
			if err != nil {
				last = err
			}
			if exited := sup.exited(); exited != "" {
				return fmt.Errorf("%s exited before the cluster was ready (see %s)", exited, filepath.Join(dir, "logs", exited+".log"))
			}
			select {
			case <-readyCtx.Done():
				return fmt.Errorf("waiting for %q: %w (last error: %v)", what, readyCtx.Err(), last)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	if err := wait("kube-apiserver ready", func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}); err != nil {
		return err
	}

	if err := sup.start(ctx, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), []string{
		"--kubeconfig=" + kcfg("controller-manager"),
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p("sa.key"),
		"--root-ca-file=" + p("ca.crt"),
		"--cluster-signing-cert-file=" + p("ca.crt"),
		"--cluster-signing-key-file=" + p("ca.key"),
		"--cluster-name=devcluster",
		// Dynamic provisioning for PersistentVolumeClaims (StatefulSets' volume claim
		// templates): hostPath volumes under /tmp, made by the controller-manager
		// itself. For tests and demos only, which is all this cluster is for.
		"--enable-hostpath-provisioner=true",
		// Every controller first fetches its own service-account token; at
		// the default 20 QPS that alone takes seconds.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--profiling=false",
		"--v=1",
	}); err != nil {
		return err
	}
	if err := sup.start(ctx, "kube-scheduler", filepath.Join(bin, "kube-scheduler"), []string{
		"--kubeconfig=" + kcfg("scheduler"),
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}); err != nil {
		return err
	}
	if err := sup.start(ctx, "kwok", filepath.Join(bin, "kwok"), []string{
		"--kubeconfig=" + kcfg("kwok"),
		// The stages kwokctl uses by default (node initialize + lease
		// heartbeat, pod ready/complete/delete), copied from the kwok
		// module by build.sh.
		"--config=" + filepath.Join(bin, "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
		"--node-ip=127.0.0.1",
	}); err != nil {
		return err
	}

	if err := createDefaultStorageClass(readyCtx, client); err != nil {
		return err
	}
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	st.Version = info.GitVersion
	for i := 0; i < nodeCount; i++ {
		if err := createNode(readyCtx, client, fmt.Sprintf("kwok-node-%d", i), st.Version); err != nil {
			return err
		}
	}
	if err := wait(fmt.Sprintf("%d fake nodes Ready", nodeCount), func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= nodeCount, nil
	}); err != nil {
		return err
	}
	// Pods can only be created once the controller-manager made the default
	// ServiceAccount; waiting for it here proves the controllers run.
	if err := wait("controller-manager created the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return err
	}

	st.Children = sup.pids()
	st.ReadyTime = time.Since(started).Seconds()
	if err := writeJSON(filepath.Join(dir, "state.json"), st); err != nil {
		return err
	}
	// The kubeconfig appears last and atomically: its existence means ready.
	data, err := os.ReadFile(kcfg("admin"))
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "kubeconfig"), data, 0o600); err != nil {
		return err
	}
	logf("ready: Kubernetes %s at %s; kubeconfig %s", st.Version, st.Server, filepath.Join(dir, "kubeconfig"))

	faults := &faultInjector{dir: dir, sup: sup, etcd: etcd, client: client, state: st}
	closeFaults, err := faults.serve(ctx)
	if err != nil {
		return fmt.Errorf("fault socket: %w", err)
	}
	defer closeFaults()

	var runErr error
	select {
	case <-ctx.Done():
		logf("stopping on signal")
	case name := <-sup.died:
		runErr = fmt.Errorf("%s exited unexpectedly (see %s)", name, filepath.Join(dir, "logs", name+".log"))
	}
	_ = os.Remove(filepath.Join(dir, "kubeconfig"))
	// A fault in progress (aborted by ctx) must not start a child behind stopAll.
	closeFaults()
	sup.stopAll()
	stopEtcd()
	_ = os.Remove(filepath.Join(dir, "state.json"))
	_ = os.Remove(filepath.Join(dir, "devcluster.pid"))
	logf("stopped")
	return runErr
}

func freePorts(names ...string) (map[string]int, error) {
	ports := map[string]int{}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	// Hold all listeners until every port is picked so they differ.
	for _, n := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[n] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// etcdServer is the embedded etcd, which a fault may stop and start again in
// this process on the same data dir and ports.
type etcdServer struct {
	dataDir, logFile     string
	clientPort, peerPort int

	mu sync.Mutex
	e  *embed.Etcd
}

func (s *etcdServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return nil
	}
	e, err := startEtcd(s.dataDir, s.logFile, s.clientPort, s.peerPort)
	if err != nil {
		return err
	}
	s.e = e
	return nil
}

func (s *etcdServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

func startEtcd(dataDir, logFile string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "devcluster"
	cfg.Dir = dataDir
	cfg.UnsafeNoFsync = true
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{logFile}
	curl := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	purl := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{curl}, []url.URL{curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{purl}, []url.URL{purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A single member: short raft ticks make it elect itself in ~0.1s, not ~1s.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("etcd did not become ready in 30s")
	}
}

// createDefaultStorageClass makes the default StorageClass, served by the
// controller-manager's hostPath provisioner, so claims without a class bind.
func createDefaultStorageClass(ctx context.Context, client kubernetes.Interface) error {
	immediate := storagev1.VolumeBindingImmediate
	deletePolicy := corev1.PersistentVolumeReclaimDelete
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "standard",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/host-path",
		ReclaimPolicy:     &deletePolicy,
		VolumeBindingMode: &immediate,
	}
	_, err := client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default StorageClass: %w", err)
	}
	return nil
}

func createNode(ctx context.Context, client kubernetes.Interface, name, version string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     runtime.GOARCH,
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    runtime.GOARCH,
				OperatingSystem: "linux",
				KubeletVersion:  version,
			},
		},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'), 0o644)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// supervisor starts children and stops them again. All forks happen on one
// goroutine locked to its OS thread, which never exits: Pdeathsig fires when
// the forking *thread* dies, so forking from arbitrary goroutines could kill
// children whenever the Go runtime retires a thread.
type supervisor struct {
	logDir string
	spawn  chan spawnReq
	died   chan string

	mu       sync.Mutex
	order    []string
	procs    map[string]*exec.Cmd
	done     map[string]chan struct{}
	specs    map[string]childSpec
	stopped  map[string]bool // stopped on purpose (a fault): its exit is not a death
	stopping bool
	dead     string
}

// childSpec is how a child was started, so a fault can start it again alike.
type childSpec struct {
	path string
	args []string
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSupervisor(logDir string) *supervisor {
	s := &supervisor{
		logDir:  logDir,
		spawn:   make(chan spawnReq),
		died:    make(chan string, 8),
		procs:   map[string]*exec.Cmd{},
		done:    map[string]chan struct{}{},
		specs:   map[string]childSpec{},
		stopped: map[string]bool{},
	}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the goroutine lives as long as the process.
		for r := range s.spawn {
			r.reply <- r.cmd.Start()
		}
	}()
	return s
}

func (s *supervisor) start(ctx context.Context, name, path string, args []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	_, again := s.specs[name]
	s.mu.Unlock()
	// A restarted child appends to its log, so what led to the fault stays readable.
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if again {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logFile, err := os.OpenFile(filepath.Join(s.logDir, name+".log"), flags, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	reply := make(chan error)
	s.spawn <- spawnReq{cmd, reply}
	if err := <-reply; err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf("started %s (pid %d): %s %s", name, cmd.Process.Pid, path, strings.Join(args, " "))
	done := make(chan struct{})
	s.mu.Lock()
	if !again {
		s.order = append(s.order, name)
	}
	s.procs[name] = cmd
	s.done[name] = done
	s.specs[name] = childSpec{path, args}
	s.stopped[name] = false
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		// Read the flags before closing done: once done is closed, a fault
		// may start this child again and clear stopped[name].
		s.mu.Lock()
		stopping := s.stopping || s.stopped[name]
		if !stopping && s.dead == "" {
			s.dead = name
		}
		s.mu.Unlock()
		close(done)
		if !stopping {
			logf("%s exited: %v", name, err)
			s.died <- name
		}
	}()
	return nil
}

// exited names a child that has died on its own, or "".
func (s *supervisor) exited() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

func (s *supervisor) pids() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for n, c := range s.procs {
		m[n] = c.Process.Pid
	}
	return m
}

// stopOne stops one child on purpose (a fault) and waits until it is gone.
func (s *supervisor) stopOne(name string) error {
	s.mu.Lock()
	cmd, done := s.procs[name], s.done[name]
	if cmd == nil {
		s.mu.Unlock()
		return fmt.Errorf("no child named %s", name)
	}
	s.stopped[name] = true
	s.mu.Unlock()
	// A short grace: the apiserver stops listening at once on SIGTERM, but its
	// exit then hangs for more than 10 s on open watches; a fault wants it gone.
	s.terminate(name, cmd, done, time.Second)
	return nil
}

// startAgain starts a child stopped by stopOne with the same command line;
// a running child is left alone.
func (s *supervisor) startAgain(ctx context.Context, name string) error {
	s.mu.Lock()
	spec, ok := s.specs[name]
	done := s.done[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("no child named %s", name)
	}
	select {
	case <-done:
	default:
		return nil
	}
	return s.start(ctx, name, spec.path, spec.args)
}

// terminate sends SIGTERM to the child's process group, SIGKILL after grace,
// and waits for it.
func (s *supervisor) terminate(name string, cmd *exec.Cmd, done chan struct{}, grace time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	// Signal the whole process group in case a child forked helpers.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		logf("%s did not stop in %s; killing it", name, grace)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// stopAll stops children in reverse start order (kwok first, apiserver
// last), SIGTERM then SIGKILL after a grace period, and waits for each.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	s.stopping = true
	order := append([]string(nil), s.order...)
	s.mu.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		name := order[i]
		s.mu.Lock()
		cmd, done := s.procs[name], s.done[name]
		s.mu.Unlock()
		s.terminate(name, cmd, done, 10*time.Second)
	}
}
