// A hostile plugin in Go for the sandbox tests: each Attack CR names a resource attack to run.
package main

import (
	"strings"

	oh "operator-host.dev/sdk"
)

// AttackSpec says which attack the next reconcile runs.
type AttackSpec struct {
	Attack string `json:"attack"`
	Count  int64  `json:"count" default:"0"`
}

// calls is state a call leaves behind: a fresh instance per call must start from zero again.
var calls int

// hoard keeps what the memory attack allocates reachable, so the collector cannot free it.
var hoard [][]byte

var plugin = &oh.Plugin[AttackSpec, struct{}]{
	Name:    "hostile",
	Version: "0.1.0",
	Parent: oh.ParentKind{
		Group:   "hostile.operator-host.dev",
		Version: "v1alpha1",
		Kind:    "Attack",
	},
	Children:  []oh.Kind{oh.KindConfigMap},
	Reconcile: reconcile,
}

func init() { oh.Register(plugin) }

func main() {}

func reconcile(parent *oh.Parent[AttackSpec, struct{}], _ *oh.Observed) (*oh.Desired, error) {
	calls++
	desired := &oh.Desired{}
	switch attack := parent.Spec.Attack; attack {
	case "none":
		desired.SetStatus(map[string]any{"attack": "none"})
	case "loop":
		for {
		}
	case "memory":
		for {
			block := make([]byte, 1<<20)
			// Touched, so the pages are really used.
			for i := range block {
				block[i] = 1
			}
			hoard = append(hoard, block)
		}
	case "big-response":
		desired.SetStatus(map[string]any{"blob": strings.Repeat("x", int(parent.Spec.Count))})
	case "counter":
		desired.SetStatus(map[string]any{"calls": calls})
	default:
		return nil, oh.InvalidField("attack", "unknown attack "+oh.DebugString(attack))
	}
	return desired, nil
}
