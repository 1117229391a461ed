// The errors a plugin returns: an invalid spec (not retried until the parent changes) or a transient failure (retried).

/** The parent's spec is invalid; the message names the field and what was expected. */
export class InvalidSpec extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'InvalidSpec';
  }
}

/** A transient problem (an observed child not decoding, say); the host retries with backoff. */
export class Retry extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'Retry';
  }
}

/**
 * An invalid-spec error for `field` of the parent's spec (`size` names `spec.size`).
 * @param {string} field
 * @param {string} expected what was expected, e.g. `must be between 0 and 10, got 11`
 */
export function invalidField(field, expected) {
  return invalidAt(`spec.${field}`, expected);
}

/**
 * An invalid-spec error for the field at `path` from the parent's top (`metadata.name`).
 * @param {string} path
 * @param {string} expected
 */
export function invalidAt(path, expected) {
  return new InvalidSpec(`${path}: ${expected}`);
}
