// The hand-written canonical ABI against the host's wasmtime: testdata/widget built for wasip1,
// componentized and run by the operator-host binary that $OPERATOR_HOST names.
package operatorhost

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// widgetComponent builds testdata/widget and componentizes it with host; it returns the
// component's path.
func widgetComponent(t *testing.T, host string) string {
	t.Helper()
	dir := t.TempDir()
	core, component := filepath.Join(dir, "widget.core.wasm"), filepath.Join(dir, "widget.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", core, ".")
	build.Dir = filepath.Join("testdata", "widget")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-mod=mod")
	if output, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, output)
	}
	if output, err := exec.Command(host, "componentize", core, "-o", component).CombinedOutput(); err != nil {
		t.Fatalf("componentize: %v\n%s", err, output)
	}
	return component
}

// run is host's stdout for args (compiled plugins cached in cache); stderr joins it when the
// command fails.
func run(t *testing.T, host, cache string, args ...string) (string, error) {
	t.Helper()
	command := exec.Command(host, args...)
	command.Env = append(os.Environ(), "OPERATOR_HOST_CACHE_DIR="+cache)
	var stderr strings.Builder
	command.Stderr = &stderr
	stdout, err := command.Output()
	if err != nil {
		return string(stdout) + stderr.String(), err
	}
	return string(stdout), nil
}

func TestTheCanonicalABIAgainstTheHost(t *testing.T) {
	host := os.Getenv("OPERATOR_HOST")
	if host == "" {
		t.Skip("OPERATOR_HOST does not name an operator-host binary (make go-test sets it when one is built)")
	}
	plugin, cache := widgetComponent(t, host), t.TempDir()
	widget, policy := filepath.Join("testdata", "widget", "widget.yaml"), filepath.Join("testdata", "widget", "policy.yaml")

	// info: plugin-info with related and implements.
	text, err := run(t, host, cache, "inspect", plugin, "-o", "json")
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, text)
	}
	var info struct {
		Contract   string   `json:"contract"`
		Implements []string `json:"implements"`
		Children   []string `json:"children"`
	}
	if err := json.Unmarshal([]byte(text), &info); err != nil {
		t.Fatal(err)
	}
	if info.Contract != "operator-host:reconciler@0.3.0" ||
		!reflect.DeepEqual(info.Implements, []string{"validate", "validateDelete", "default", "convert"}) ||
		!reflect.DeepEqual(info.Children, []string{"v1/ConfigMap", "batch/v1/Job", "v1/Service"}) {
		t.Errorf("inspect: %+v", info)
	}

	// default, validate and reconcile: the related objects chosen by the defaulted name and by
	// labels, each Secret as its view says; the children's options; the requeue.
	text, err = run(t, host, cache, "render", plugin, widget, "--policy", policy, "--now", "2026-01-01T00:00:00Z", "-o", "json")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, text)
	}
	var rendered struct {
		Handling       map[string]string `json:"handling"`
		RequeueAfterMs uint64            `json:"requeueAfterMs"`
		Status         struct {
			Seen []string `json:"seen"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(text), &rendered); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	wantHandling := map[string]string{
		"Job/migrate":    "stage 0: update=recreate ready-when=condition Complete",
		"ConfigMap/kept": `stage 1: update=create-only ready-when=data.a="b"`,
		"Service/plain":  "stage 2",
	}
	if !reflect.DeepEqual(rendered.Handling, wantHandling) {
		t.Errorf("handling = %q, want %q", rendered.Handling, wantHandling)
	}
	wantSeen := []string{
		`tls/tls-cert {"key":"aGVsbG8="}`,
		`hashed/tls-cert {"key":"MmNmMjRkYmE1ZmIwYTMwZTI2ZTgzYjJhYzViOWUyOWUxYjE2MWU1YzFmYTc0MjVlNzMwNDMzNjI5MzhiOTgyNA=="}`,
		`config/c1 {"x":"1"}`,
	}
	if !reflect.DeepEqual(rendered.Status.Seen, wantSeen) || rendered.RequeueAfterMs != 1500 {
		t.Errorf("seen %q, requeue %d; want %q, 1500", rendered.Status.Seen, rendered.RequeueAfterMs, wantSeen)
	}

	// validate's field errors: each type with and without a value.
	invalid := filepath.Join(t.TempDir(), "invalid.yaml")
	source, _ := os.ReadFile(widget)
	broken := strings.NewReplacer("size: 3", "size: 9", "secretName: TLS-Cert", `secretName: ""`).Replace(string(source))
	if err := os.WriteFile(invalid, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	text, _ = run(t, host, cache, "render", plugin, invalid, "--policy", policy, "--now", "2026-01-01T00:00:00Z")
	want := `refused at admission: spec.size: Invalid value: 9: must be at most 5, spec.size: Unsupported value: 9: supported values: "1", "2", spec.secretName: Required value: a Secret's name`
	if !strings.Contains(text, want) {
		t.Errorf("render of an invalid widget:\n%s\nwant it to contain\n%s", text, want)
	}

	// convert: both versions round trip.
	text, err = run(t, host, cache, "conformance", plugin, widget, "--policy", policy)
	if err != nil {
		t.Fatalf("conformance: %v\n%s", err, text)
	}
	for _, line := range []string{
		"PASS conversion round trip via v2 default/w: v1 -> v2 -> v1 gives the object back",
		"PASS admitted default/w: with warnings: checked by w",
		"PASS defaulting idempotent default/w",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("conformance lacks %q:\n%s", line, text)
		}
	}
}
