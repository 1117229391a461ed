// Command testpod is the devcluster real node's test image: it prints what
// it can tell about how it runs (user, whether a file can be written in the
// root directory and in each directory named by -write), one line each, then
// prints "testpod ready" and waits for SIGTERM or SIGINT, then exits 0.
// With -apiserver it also asks the apiserver for /version the way in-cluster
// clients do (KUBERNETES_SERVICE_HOST/PORT, the service account's token and
// CA) and prints the answer's status and gitVersion.
//
//	testpod [-say TEXT] [-write DIR]... [-apiserver] [-exit]
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ",") }
func (d *dirs) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	say := flag.String("say", "", "a line to print first")
	exit := flag.Bool("exit", false, "exit 0 after the report instead of waiting for a signal")
	apiserver := flag.Bool("apiserver", false, "GET /version from the apiserver as an in-cluster client")
	var write dirs
	flag.Var(&write, "write", "a directory to write a file into (repeatable)")
	flag.Parse()

	if *say != "" {
		fmt.Println(*say)
	}
	host, _ := os.Hostname()
	fmt.Printf("testpod uid=%d gid=%d hostname=%s\n", os.Getuid(), os.Getgid(), host)
	for _, d := range append([]string{"/"}, write...) {
		fmt.Printf("testpod write %s: %s\n", d, tryWrite(d))
	}
	if *apiserver {
		fmt.Printf("testpod apiserver: %s\n", version())
	}
	fmt.Println("testpod ready")
	if *exit {
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	fmt.Println("testpod stopping")
}

// tryWrite reports "ok" if a file can be written in dir, else the error.
func tryWrite(dir string) string {
	p := filepath.Join(dir, fmt.Sprintf(".testpod-%d", os.Getpid()))
	if err := os.WriteFile(p, []byte("ok\n"), 0o644); err != nil {
		return err.Error()
	}
	_ = os.Remove(p)
	return "ok"
}

// version asks the apiserver for /version as an in-cluster client would.
func version() string {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return err.Error()
	}
	caPEM, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return err.Error()
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	req, err := http.NewRequest("GET", "https://"+host+"/version", nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var v struct{ GitVersion string }
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return fmt.Sprintf("%s from %s, gitVersion %s", resp.Status, host, v.GitVersion)
}
