// Kubernetes-style status conditions, without a clock (the host stamps lastTransitionTime).

package operatorhost

import "strings"

// Condition is a status condition in the shape of metav1.Condition.
//
// Plugins have no clock, so they leave LastTransitionTime empty: the host stamps it when it
// writes status, keeping the previous time while the condition's status is unchanged.
type Condition struct {
	// Type is CamelCase, e.g. Available.
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status string `json:"status"`
	// Reason is a CamelCase reason for the last transition.
	Reason string `json:"reason"`
	// Message is for people.
	Message string `json:"message"`
	// ObservedGeneration is the parent's metadata.generation this condition was computed
	// from; a pointer so that a generation given as 0 is still written.
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is filled in by the host; plugins leave it empty.
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// NewCondition is a condition of conditionType that is True when ok, False otherwise.
// observedGeneration is the parent's metadata.generation, or nil to leave it out.
func NewCondition(conditionType string, ok bool, reason, message string, observedGeneration *int64) Condition {
	status := "False"
	if ok {
		status = "True"
	}
	c := Condition{Type: conditionType, Status: status, Reason: reason, Message: message}
	if observedGeneration != nil {
		// A copy: the condition must not change with the caller's variable.
		generation := *observedGeneration
		c.ObservedGeneration = &generation
	}
	return c
}

// ReadyFromPhase is the Ready condition of a parent in phase: True when ready, with the phase
// as its reason in CamelCase (ONLINE_PARTIAL and online-partial give OnlinePartial), so that a
// status keeps a phase for people and `kubectl wait --for=condition=Ready` works.
func ReadyFromPhase(phase string, ready bool, message string, observedGeneration *int64) Condition {
	return NewCondition("Ready", ready, CamelCaseReason(phase), message, observedGeneration)
}

// CamelCaseReason is text as a condition reason (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$):
// words split at anything but ASCII letters and digits, each capitalised; Unknown when
// nothing is left.
func CamelCaseReason(text string) string {
	var reason strings.Builder
	words := strings.FieldsFunc(text, func(r rune) bool { return !isASCIIAlphanumeric(r) })
	for _, word := range words {
		// A word already in CamelCase (RolloutComplete) keeps its inner capitals.
		keepCase := strings.ContainsFunc(word, func(r rune) bool { return 'a' <= r && r <= 'z' })
		rest := word[1:]
		if !keepCase {
			rest = strings.ToLower(rest)
		}
		reason.WriteString(strings.ToUpper(word[:1]))
		reason.WriteString(rest)
	}
	// A reason begins with a letter.
	trimmed := strings.TrimLeft(reason.String(), "0123456789")
	if trimmed == "" {
		return "Unknown"
	}
	return trimmed
}

func isASCIIAlphanumeric(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}
