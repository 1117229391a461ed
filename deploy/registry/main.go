// Command registry serves an OCI distribution registry on loopback for operator-host's tests
// and demo: go-containerregistry's pkg/registry (in memory), optionally behind HTTP basic auth.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free one)")
	addrFile := flag.String("addr-file", "", "write the listening host:port here once serving")
	user := flag.String("user", "", "require HTTP basic auth as this user (password from $REGISTRY_PASSWORD)")
	flag.Parse()
	password := os.Getenv("REGISTRY_PASSWORD")
	if *user != "" && password == "" {
		log.Fatal("--user needs $REGISTRY_PASSWORD")
	}

	var handler http.Handler = withLocation(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	if *user != "" {
		handler = basicAuth(handler, *user, password)
	}
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		// Written whole, then renamed, so a reader never sees half an address.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(listener.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("registry serving on %s (basic auth: %v)", listener.Addr(), *user != "")
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = server.Shutdown(context.Background())
	}()
	if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// basicAuth answers every request without the right credentials with 401 and a Basic
// challenge, as a registry with htpasswd auth does.
func basicAuth(next http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(user))&subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`+"\n")
	})
}

// withLocation adds the Location header the distribution spec requires on a 201 (blob
// upload completed, manifest put): pkg/registry v0.22.1 leaves it out, and clients that follow
// the spec (oci-client) refuse the answer without it.
func withLocation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(locationWriter{w, r}, r)
	})
}

type locationWriter struct {
	http.ResponseWriter
	request *http.Request
}

func (w locationWriter) WriteHeader(code int) {
	if code == http.StatusCreated && w.Header().Get("Location") == "" {
		path := w.request.URL.Path
		digest := w.Header().Get("Docker-Content-Digest")
		if i := strings.Index(path, "/blobs/uploads/"); i >= 0 {
			w.Header().Set("Location", path[:i]+"/blobs/"+digest)
		} else if i := strings.Index(path, "/manifests/"); i >= 0 {
			w.Header().Set("Location", path[:i]+"/manifests/"+digest)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}
