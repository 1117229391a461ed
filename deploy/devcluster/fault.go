// Control-plane faults: `devcluster fault` asks a running `devcluster up` to
// stop, start or restart its kube-apiserver or its embedded etcd.
//
// The request goes over a unix socket in the state dir (DIR/fault.sock)
// rather than a signal: it names an action and a component and gets an
// answer back once the action is done (after a start, once /readyz answers
// ok) or the reason it failed, which a signal can carry neither of. The
// socket's file permissions limit it to the user who runs the cluster.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// faultSocket is the name of the socket in the state dir.
const faultSocket = "fault.sock"

type faultRequest struct {
	Action    string        `json:"action"`
	Component string        `json:"component"`
	DownFor   time.Duration `json:"downFor"`
	Timeout   time.Duration `json:"timeout"`
}

type faultReply struct {
	Error string `json:"error,omitempty"`
	// DownSeconds: from the stop until /readyz answered ok again (restart).
	DownSeconds float64 `json:"downSeconds,omitempty"`
	// ReadySeconds: from the start until /readyz answered ok (start, restart).
	ReadySeconds float64 `json:"readySeconds,omitempty"`
}

// faultInjector serves fault requests, one at a time.
type faultInjector struct {
	dir    string
	sup    *supervisor
	etcd   *etcdServer
	client kubernetes.Interface
	state  *state

	mu sync.Mutex
}

// serve listens on DIR/fault.sock until ctx ends; the returned function
// closes the socket and waits for a request in progress (idempotent).
func (f *faultInjector) serve(ctx context.Context) (func(), error) {
	path := filepath.Join(f.dir, faultSocket)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.answer(ctx, conn)
			}()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			l.Close()
			wg.Wait()
			_ = os.Remove(path)
		})
	}, nil
}

func (f *faultInjector) answer(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	var req faultRequest
	var reply faultReply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		reply.Error = fmt.Sprintf("reading the request: %v", err)
	} else if err := f.do(ctx, req, &reply); err != nil {
		reply.Error = err.Error()
	}
	if reply.Error != "" {
		logf("fault %s %s failed: %s", req.Action, req.Component, reply.Error)
	}
	_ = json.NewEncoder(conn).Encode(reply)
}

func (f *faultInjector) do(ctx context.Context, req faultRequest, reply *faultReply) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var stop func() error
	var start func() error
	switch req.Component {
	case "kube-apiserver", "apiserver":
		stop = func() error { return f.sup.stopOne("kube-apiserver") }
		start = func() error { return f.sup.startAgain(ctx, "kube-apiserver") }
	case "etcd":
		stop = func() error { f.etcd.stop(); return nil }
		start = f.etcd.start
	default:
		return fmt.Errorf("unknown component %q (kube-apiserver or etcd)", req.Component)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	startAndWait := func() error {
		begin := time.Now()
		if err := start(); err != nil {
			return fmt.Errorf("starting %s: %w", req.Component, err)
		}
		f.recordPids()
		if err := f.waitReady(ctx, timeout); err != nil {
			return err
		}
		reply.ReadySeconds = time.Since(begin).Seconds()
		return nil
	}
	logf("fault: %s %s (down for %s)", req.Action, req.Component, req.DownFor)
	switch req.Action {
	case "stop":
		return stop()
	case "start":
		return startAndWait()
	case "restart":
		begin := time.Now()
		if err := stop(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(req.DownFor):
		}
		if err := startAndWait(); err != nil {
			return err
		}
		reply.DownSeconds = time.Since(begin).Seconds()
		logf("fault: %s back after %.2fs (ready %.2fs after its start)", req.Component, reply.DownSeconds, reply.ReadySeconds)
		return nil
	default:
		return fmt.Errorf("unknown action %q (stop, start or restart)", req.Action)
	}
}

// recordPids rewrites state.json with the children's current pids: stop.sh
// reads them to make sure none is left behind.
func (f *faultInjector) recordPids() {
	f.state.Children = f.sup.pids()
	if err := writeJSON(filepath.Join(f.dir, "state.json"), f.state); err != nil {
		logf("fault: writing state.json: %v", err)
	}
}

func (f *faultInjector) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		body, err := f.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		if err != nil {
			last = err
		}
		if name := f.sup.exited(); name != "" {
			return fmt.Errorf("%s exited (see %s)", name, filepath.Join(f.dir, "logs", name+".log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the apiserver's /readyz did not answer ok within %s: %w (last error: %v)", timeout, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopWithOwner returns a context that ends once the process ownerPID has
// exited, so a cluster started for one test binary goes away with it.
func stopWithOwner(ctx context.Context, ownerPID int) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		for {
			// Signal 0 checks existence; EPERM would mean a recycled pid of another user.
			if err := syscall.Kill(ownerPID, 0); errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EPERM) {
				logf("owner pid %d exited", ownerPID)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return ctx
}

// faultMain is `devcluster fault`: it sends one request to the running
// cluster of --dir and prints the outcome. Flags may come before or after
// the action and component.
func faultMain(args []string) int {
	fs := flag.NewFlagSet("fault", flag.ExitOnError)
	dir := fs.String("dir", "target/devcluster", "state directory of the running cluster")
	downFor := fs.Duration("down-for", 0, "restart: how long the component stays down")
	timeout := fs.Duration("timeout", 60*time.Second, "start, restart: how long to wait for /readyz")
	var pos []string
	for {
		_ = fs.Parse(args)
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	req := faultRequest{Action: pos[0], Component: pos[1], DownFor: *downFor, Timeout: *timeout}
	conn, err := net.Dial("unix", filepath.Join(*dir, faultSocket))
	if err != nil {
		fmt.Fprintf(os.Stderr, "devcluster fault: is the cluster of %s running? %v\n", *dir, err)
		return 1
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster fault: sending the request: %v\n", err)
		return 1
	}
	var reply faultReply
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster fault: reading the answer: %v\n", err)
		return 1
	}
	if reply.Error != "" {
		fmt.Fprintf(os.Stderr, "devcluster fault: %s %s: %s\n", req.Action, req.Component, reply.Error)
		return 1
	}
	switch req.Action {
	case "stop":
		fmt.Printf("%s stopped\n", req.Component)
	case "start":
		fmt.Printf("%s started; /readyz ok after %.2fs\n", req.Component, reply.ReadySeconds)
	default:
		fmt.Printf("%s restarted; /readyz ok %.2fs after the stop (%.2fs after the start)\n", req.Component, reply.DownSeconds, reply.ReadySeconds)
	}
	return 0
}
