// The README's example plugin compiles, for the host's target and natively, as written.
package operatorhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheReadmesExamplePluginBuilds(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, found := strings.Cut(string(readme), "```go\n")
	example, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatal("the README has no Go example")
	}
	sdk, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module example.com/thing\n\ngo 1.26\n\nrequire operator-host.dev/sdk v0.0.0\n\nreplace operator-host.dev/sdk => " + sdk + "\n"
	for name, text := range map[string]string{"go.mod": goMod, "main.go": example} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, build := range [][]string{
		{"vet", "./..."},
		{"build", "-buildmode=c-shared", "-o", filepath.Join(dir, "thing.wasm"), "."},
	} {
		command := exec.Command("go", build...)
		command.Dir = dir
		command.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if build[0] == "build" {
			command.Env = append(command.Env, "GOOS=wasip1", "GOARCH=wasm")
		}
		if output, err := command.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(build, " "), err, output)
		}
	}
}
