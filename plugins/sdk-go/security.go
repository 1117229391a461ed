// Security contexts that pass the Pod Security Standard `restricted`, the strictest level a host's policy can require.

package operatorhost

// RestrictedPodSecurityContext is a pod security context for `restricted`: it runs as non-root
// (as user, when one is given, or else as the image's own non-root user) with the runtime's
// default seccomp profile. user is optional, as in the other SDKs; at most one may be given.
func RestrictedPodSecurityContext(user ...int64) map[string]any {
	if len(user) > 1 {
		panic("operatorhost: RestrictedPodSecurityContext takes at most one user")
	}
	context := map[string]any{
		"runAsNonRoot":   true,
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
	}
	if len(user) == 1 {
		context["runAsUser"] = user[0]
		context["runAsGroup"] = user[0]
		context["fsGroup"] = user[0]
	}
	return context
}

// RestrictedContainerSecurityContext is a container security context for `restricted`: no
// privilege escalation, every capability dropped.
func RestrictedContainerSecurityContext() map[string]any {
	return map[string]any{
		"allowPrivilegeEscalation": false,
		"capabilities":             map[string]any{"drop": []any{"ALL"}},
	}
}
