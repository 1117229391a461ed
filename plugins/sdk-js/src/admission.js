// What a plugin answers at admission: field errors and warnings (`validate`) in the API server's own terms, and the merge patches that keep `default` to the fields it changed.

import { InvalidSpec, Retry } from './errors.js';
import { canonicalJson, canonicalJsonAt, copyNumberSource, rustDebugString } from './json.js';

/** Why a field is refused (the contract's `field-error-type`), and how the API server prints it. */
const DESCRIPTIONS = Object.freeze({
  required: 'Required value',
  invalid: 'Invalid value',
  forbidden: 'Forbidden',
  'not-supported': 'Unsupported value',
  duplicate: 'Duplicate value',
  'too-long': 'Too long',
  'too-many': 'Too many',
  'not-found': 'Not found',
});

/** The reasons whose message shows the refused value. */
const SHOWS_VALUE = new Set(['invalid', 'not-supported', 'duplicate']);

/** The contract's field error types, e.g. `invalid`, `not-supported`. */
export const FIELD_ERROR_TYPES = Object.freeze(Object.keys(DESCRIPTIONS));

/** One refused field: `spec.size: Invalid value: 0: must be between 1 and 10`. */
export class FieldError {
  /**
   * @param {object} error
   * @param {string} error.reason one of `FIELD_ERROR_TYPES`
   * @param {string} error.field the path from the object's top: `spec.size`, `spec.tls.secretName`
   * @param {unknown} [error.value] the refused value (any JSON value); undefined for none
   * @param {string} [error.detail] what was expected
   */
  constructor({ reason, field, value, detail = '' }) {
    if (!Object.hasOwn(DESCRIPTIONS, reason)) {
      throw new TypeError(`a field error's reason must be one of ${FIELD_ERROR_TYPES.join(', ')}, got ${JSON.stringify(reason)}`);
    }
    if (typeof field !== 'string') throw new TypeError(`a field error needs the field's path as a string, got ${typeof field}`);
    this.reason = reason;
    this.field = field;
    this.value = value;
    this.detail = String(detail);
    Object.freeze(this);
  }

  /** As the API server prints it: `spec.size: Invalid value: 0: must be between 1 and 10`. */
  toString() {
    let text = `${this.field}: ${DESCRIPTIONS[this.reason]}`;
    if (this.value !== undefined && SHOWS_VALUE.has(this.reason)) text += `: ${canonicalJson(this.value)}`;
    if (this.detail !== '') text += `: ${this.detail}`;
    return text;
  }

  /** The contract's `field-error` record. */
  toContract() {
    return {
      reason: this.reason,
      field: this.field,
      value: this.value === undefined ? undefined : canonicalJson(this.value),
      detail: this.detail,
    };
  }
}

// A value the author passed as undefined is JSON's null, as a Rust `None` serializes.
const shown = (value) => (value === undefined ? null : value);

/**
 * What `validate` answers: the request is refused when it holds an error; warnings are shown
 * either way (`kubectl apply` prints `Warning: ...`). Every method returns the validation, so
 * calls chain.
 */
export class Validation {
  constructor() {
    /** @type {FieldError[]} */
    this.errors = [];
    /** @type {string[]} */
    this.warnings = [];
  }

  /**
   * Adds a field error.
   * @param {FieldError | ConstructorParameters<typeof FieldError>[0]} error
   */
  error(error) {
    this.errors.push(error instanceof FieldError ? error : new FieldError(error));
    return this;
  }

  /** `field: Invalid value: <value>: <detail>`. */
  invalid(field, value, detail) {
    return this.error({ reason: 'invalid', field, value: shown(value), detail });
  }

  /** `field: Required value: <detail>`. */
  required(field, detail) {
    return this.error({ reason: 'required', field, detail });
  }

  /** `field: Forbidden: <detail>`. */
  forbidden(field, detail) {
    return this.error({ reason: 'forbidden', field, detail });
  }

  /**
   * `field: Unsupported value: <value>: supported values: "a", "b"`.
   * @param {string} field
   * @param {unknown} value
   * @param {string[]} supported
   */
  notSupported(field, value, supported) {
    const list = supported.map((s) => rustDebugString(String(s))).join(', ');
    return this.error({ reason: 'not-supported', field, value: shown(value), detail: `supported values: ${list}` });
  }

  /** `field: Invalid value: <value>: field is immutable`, the API server's words for a field an update may not change. */
  immutable(field, value) {
    return this.invalid(field, value, 'field is immutable');
  }

  /**
   * Adds the field error of an `InvalidSpec` of the form `path: detail` (what `invalidField`
   * and `invalidAt` make), so that the checks `reconcile` makes refuse the same spec at
   * admission: `check(() => validateSpec(parent.spec))`. A check that passes, or throws a
   * `Retry`, adds nothing; any other exception is a bug and is thrown on.
   * @param {(() => unknown) | InvalidSpec | Retry} checkOrError a function to run, or an error it threw
   */
  check(checkOrError) {
    let error = checkOrError;
    if (typeof checkOrError === 'function') {
      try {
        checkOrError();
        return this;
      } catch (thrown) {
        error = thrown;
      }
    }
    if (error instanceof InvalidSpec || error?.name === 'InvalidSpec') {
      const message = String(error.message);
      const at = message.indexOf(': ');
      const [field, detail] = at < 0 ? ['spec', message] : [message.slice(0, at), message.slice(at + 2)];
      return this.error({ reason: 'invalid', field, detail });
    }
    if (error instanceof Retry || error?.name === 'Retry') return this;
    if (error instanceof Error) throw error;
    throw new TypeError(`check takes a function to run or the InvalidSpec it threw, got ${canonicalJson(shown(error))}`);
  }

  /** Adds a warning, shown by kubectl as `Warning: <message>`. */
  warn(message) {
    this.warnings.push(String(message));
    return this;
  }

  /** Whether nothing is refused. */
  get isValid() {
    return this.errors.length === 0;
  }

  /**
   * Throws the errors as one `InvalidSpec` (`spec.a: ..., spec.b: ...`), for a `reconcile`
   * that checks what `validate` checks; does nothing when nothing is refused.
   */
  throwIfInvalid() {
    if (this.errors.length > 0) throw new InvalidSpec(this.errors.map(String).join(', '));
  }

  /** The contract's `validation` record. */
  toContract() {
    return { errors: this.errors.map((e) => e.toContract()), warnings: [...this.warnings] };
  }
}

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);

// An own data property even for a key `__proto__`, as `parseJson` makes them.
function setOwn(object, key, value) {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The RFC 7386 merge patch that turns `before` into `after` (`null` removes a key), or
 * undefined when they are equal. Both are JSON values (as `parseJson` gives them); values are
 * compared as serde_json compares them: `3` and `3.0` differ.
 * @param {any} before
 * @param {any} after
 * @returns {any}
 */
export function mergeDiff(before, after) {
  return diffAt({ value: before }, { value: after }, 'value');
}

/** The merge patch between `before[key]` and `after[key]`, each read with how its numbers were written. */
function diffAt(before, after, key) {
  const [old, now] = [before[key], after[key]];
  if (!(isObject(old) && isObject(now))) return canonicalJsonAt(before, key) === canonicalJsonAt(after, key) ? undefined : now;
  const patch = {};
  for (const field of Object.keys(now)) {
    const change = Object.hasOwn(old, field) ? diffAt(old, now, field) : now[field];
    if (change === undefined) continue;
    setOwn(patch, field, change);
    if (change === now[field]) copyNumberSource(now, field, patch, field);
  }
  for (const field of Object.keys(old)) {
    if (!Object.hasOwn(now, field)) setOwn(patch, field, null);
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/**
 * `target` with the RFC 7386 merge patch `patch` applied (changed in place where it is an
 * object; the result is returned, as a patch that is not an object replaces it).
 * @param {any} target
 * @param {any} patch
 * @returns {any}
 */
export function mergeApply(target, patch) {
  if (!isObject(patch)) return patch;
  const into = isObject(target) ? target : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete into[key];
    } else {
      setOwn(into, key, mergeApply(Object.hasOwn(into, key) ? into[key] : null, value));
      if (!isObject(value)) copyNumberSource(patch, key, into, key);
    }
  }
  return into;
}
