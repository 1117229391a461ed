// Security contexts that pass the Pod Security Standard `restricted`, the strictest level a host's policy can require.

/**
 * A pod security context for `restricted`: runs as non-root (as `user`, or the image's own
 * non-root user when absent) with the runtime's default seccomp profile.
 * @param {number} [user]
 */
export function restrictedPodSecurityContext(user) {
  const context = { runAsNonRoot: true };
  if (user !== undefined && user !== null) {
    context.runAsUser = user;
    context.runAsGroup = user;
    context.fsGroup = user;
  }
  context.seccompProfile = { type: 'RuntimeDefault' };
  return context;
}

/** A container security context for `restricted`: no privilege escalation, every capability dropped. */
export function restrictedContainerSecurityContext() {
  return { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
}
