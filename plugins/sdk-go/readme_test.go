// The README's example plugin compiles, for the host's target and natively, as written, and
// its status says what its rollouts are.
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
	for name, text := range map[string]string{"go.mod": goMod, "main.go": example, "main_test.go": readmeExampleTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, build := range [][]string{
		{"vet", "./..."},
		{"build", "-buildmode=c-shared", "-o", filepath.Join(dir, "thing.wasm"), "."},
		{"test", "."},
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

// readmeExampleTest runs the README's example: its conditions follow the migration Job's run
// and the Deployment's rollout of what it desires now.
const readmeExampleTest = `package main

import (
	"testing"

	oh "operator-host.dev/sdk"
)

// conditions is the status's conditions as "type status reason".
func conditions(t *testing.T, desired *oh.Desired) []string {
	t.Helper()
	var found []string
	for _, item := range desired.Status.(map[string]any)["conditions"].([]any) {
		c := item.(map[string]any)
		found = append(found, c["type"].(string)+" "+c["status"].(string)+" "+c["reason"].(string))
	}
	return found
}

func expect(t *testing.T, desired *oh.Desired, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	got := conditions(t, desired)
	if len(got) != len(want) {
		t.Fatalf("conditions %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("conditions %q, want %q", got, want)
		}
	}
}

// applied is desired's child of kind named name as the API server holds it, with status.
func applied(desired *oh.Desired, kind oh.Kind, name string, status map[string]any) map[string]any {
	object := desired.Get(kind, name)
	object["metadata"].(map[string]any)["generation"] = 1
	object["status"] = status
	return object
}

func TestTheStatusFollowsTheRunAndTheRollout(t *testing.T) {
	thing := map[string]any{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "web", "namespace": "default", "generation": 1},
		"spec":     map[string]any{"size": 2},
	}
	desired, err := plugin.Run(thing)
	expect(t, desired, err, "MigrationComplete False NotCreated", "Available False NotCreated")
	if options, _ := desired.OptionsOf(oh.KindJob, "web-migrate"); options.ReadyWhen == nil || options.ReadyWhen.Condition != "Complete" {
		t.Errorf("the Job's options: %+v", options)
	}

	job := applied(desired, oh.KindJob, "web-migrate", map[string]any{"active": 1})
	desired, err = plugin.Run(thing, job)
	expect(t, desired, err, "MigrationComplete False JobRunning", "Available False NotCreated")

	job["status"] = map[string]any{"succeeded": 1, "conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}
	deployment := applied(desired, oh.KindDeployment, "web", map[string]any{
		"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
	})
	desired, err = plugin.Run(thing, job, deployment)
	expect(t, desired, err, "MigrationComplete True RolloutComplete", "Available True RolloutComplete")

	// A new image: neither the old Job's run nor the old Deployment's rollout counts.
	thing["spec"].(map[string]any)["image"] = "nginx:1.28"
	desired, err = plugin.Run(thing, job, deployment)
	expect(t, desired, err, "MigrationComplete False SpecNotApplied", "Available False SpecNotApplied")
}
`
