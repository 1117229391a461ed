// Tests of conditions and (as the JS SDK's plugin tests have them together) security contexts.

package operatorhost

import (
	"encoding/json"
	"testing"
)

func TestReadyFromPhaseMakesAValidReason(t *testing.T) {
	generation := int64(2)
	for _, tc := range []struct{ phase, reason string }{
		{"ONLINE_PARTIAL", "OnlinePartial"},
		{"online-partial", "OnlinePartial"},
		{"Running", "Running"},
		{"RolloutComplete", "RolloutComplete"},
		{"3 members", "Members"},
		{"", "Unknown"},
		// Beyond the JS vectors: only ASCII letters and digits make words.
		{"ready: 2/3 ñodes", "Ready23Odes"},
		{"42", "Unknown"},
		{"--", "Unknown"},
	} {
		c := ReadyFromPhase(tc.phase, true, "m", &generation)
		want := Condition{Type: "Ready", Status: "True", Reason: tc.reason, Message: "m", ObservedGeneration: &generation}
		if text, wantText := statusJSON(t, c), statusJSON(t, want); text != wantText {
			t.Errorf("ReadyFromPhase(%q) = %s, want %s", tc.phase, text, wantText)
		}
		if got := CamelCaseReason(tc.phase); got != tc.reason {
			t.Errorf("CamelCaseReason(%q) = %q, want %q", tc.phase, got, tc.reason)
		}
	}
	if got := ReadyFromPhase("Pending", false, "", nil).Status; got != "False" {
		t.Errorf("ReadyFromPhase(Pending, false) has status %q, want False", got)
	}
}

func TestConditionJSON(t *testing.T) {
	zero, two := int64(0), int64(2)
	for _, tc := range []struct {
		name      string
		condition Condition
		want      string
	}{
		{"no generation", NewCondition("Available", false, "R", "m", nil),
			`{"type":"Available","status":"False","reason":"R","message":"m"}`},
		{"a generation", NewCondition("Available", true, "R", "m", &two),
			`{"type":"Available","status":"True","reason":"R","message":"m","observedGeneration":2}`},
		// Given, so written, as the JS and Rust SDKs do.
		{"generation 0", NewCondition("Available", true, "R", "", &zero),
			`{"type":"Available","status":"True","reason":"R","message":"","observedGeneration":0}`},
	} {
		if got := statusJSON(t, tc.condition); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// The condition keeps the generation it was given.
	generation := int64(3)
	c := NewCondition("Ready", true, "R", "m", &generation)
	generation = 4
	if *c.ObservedGeneration != 3 {
		t.Errorf("the condition's generation changed with the caller's variable: %d", *c.ObservedGeneration)
	}
	// A condition the host stamped reads back.
	var read Condition
	text := `{"type":"Ready","status":"True","reason":"Up","message":"","lastTransitionTime":"2024-01-01T00:00:00Z"}`
	if err := json.Unmarshal([]byte(text), &read); err != nil || read.LastTransitionTime != "2024-01-01T00:00:00Z" || read.ObservedGeneration != nil {
		t.Errorf("decoding %s: %+v, %v", text, read, err)
	}
	if got := statusJSON(t, read); got != text {
		t.Errorf("%s written back as %s", text, got)
	}
}

func TestRestrictedSecurityContexts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		context map[string]any
		want    string
	}{
		{"pod", RestrictedPodSecurityContext(),
			`{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}`},
		{"pod as 27", RestrictedPodSecurityContext(27),
			`{"fsGroup":27,"runAsGroup":27,"runAsNonRoot":true,"runAsUser":27,"seccompProfile":{"type":"RuntimeDefault"}}`},
		{"container", RestrictedContainerSecurityContext(),
			`{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}`},
	} {
		if got := statusJSON(t, tc.context); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func statusJSON(t *testing.T, value any) string {
	t.Helper()
	text, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}
