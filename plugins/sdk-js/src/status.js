// Kubernetes-style status conditions, without a clock (the host stamps lastTransitionTime).

/**
 * @typedef {object} Condition A status condition in the shape of `metav1.Condition`.
 * @property {string} type CamelCase, e.g. `Available`
 * @property {'True'|'False'|'Unknown'} status
 * @property {string} reason CamelCase reason for the last transition
 * @property {string} message human-readable
 * @property {number} [observedGeneration] the parent's generation this was computed from
 * @property {string} [lastTransitionTime] filled in by the host; plugins leave it out
 */

/**
 * A condition that is `True` when `ok`, `False` otherwise.
 * @param {string} type
 * @param {boolean} ok
 * @param {string} reason
 * @param {string} message
 * @param {number} [observedGeneration] the parent's `metadata.generation`
 * @returns {Condition}
 */
export function condition(type, ok, reason, message, observedGeneration) {
  const result = { type, status: ok ? 'True' : 'False', reason, message };
  if (observedGeneration !== undefined && observedGeneration !== null) result.observedGeneration = observedGeneration;
  return result;
}

/**
 * The `Ready` condition of a parent in `phase`: `True` when `ready`, with the phase as its
 * reason in CamelCase (`ONLINE_PARTIAL` and `online-partial` give `OnlinePartial`), so a status
 * keeps a `phase` for people and `kubectl wait --for=condition=Ready` works.
 * @param {string} phase
 * @param {boolean} ready
 * @param {string} message
 * @param {number} [observedGeneration]
 * @returns {Condition}
 */
export function readyFromPhase(phase, ready, message, observedGeneration) {
  return condition('Ready', ready, camelCaseReason(phase), message, observedGeneration);
}

/**
 * `text` as a condition reason (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`): words split at
 * anything but ASCII letters and digits, each capitalised; `Unknown` when nothing is left.
 * @param {string} text
 */
export function camelCaseReason(text) {
  let reason = '';
  for (const word of text.split(/[^A-Za-z0-9]/)) {
    if (word === '') continue;
    // A word already in CamelCase (`RolloutComplete`) keeps its inner capitals.
    const keepCase = /[a-z]/.test(word);
    const rest = word.slice(1);
    reason += word[0].toUpperCase() + (keepCase ? rest : rest.toLowerCase());
  }
  const trimmed = reason.replace(/^[0-9]+/, '');
  return trimmed === '' ? 'Unknown' : trimmed;
}
