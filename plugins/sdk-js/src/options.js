// Contract 0.2.0's additions on the author's side: how the host applies and prunes a child (ChildOptions), and the other objects a plugin reads (Related).

import { canonicalJson } from './json.js';

/** How the host brings an existing child to what the plugin returned (the contract's `update-strategy`). */
export const UPDATE_STRATEGIES = Object.freeze(['in-place', 'recreate', 'create-only']);
/** What the host does with a child the plugin no longer returns (the contract's `delete-policy`). */
export const DELETE_POLICIES = Object.freeze(['delete', 'orphan']);
/** What of a related Secret's data the plugin sees (the contract's `secret-view`). */
export const SECRET_VIEWS = Object.freeze(['data-hash', 'full']);

function oneOf(what, value, allowed) {
  if (!allowed.includes(value)) {
    throw new TypeError(`${what} must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}, got ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * How the host handles one child (`desired.childWith(kind, object, options)`): an update
 * strategy, a delete policy, and a readiness barrier for the children added after it. Each
 * builder method returns a new ChildOptions, so one value can be shared.
 */
export class ChildOptions {
  /**
   * @param {{update?: 'in-place'|'recreate'|'create-only', onPrune?: 'delete'|'orphan',
   *   readyWhen?: {condition: string} | {path: string, value: string}}} [options]
   *   `readyWhen.value` is JSON text; prefer `readyWhenField`, which writes it.
   */
  constructor(options = {}) {
    /** How an existing child is updated. */
    this.update = oneOf('update', options.update ?? 'in-place', UPDATE_STRATEGIES);
    /** What happens once the plugin stops returning it. */
    this.onPrune = oneOf('onPrune', options.onPrune ?? 'delete', DELETE_POLICIES);
    /** A barrier: the children added after this one are applied only once it is ready. */
    this.readyWhen = options.readyWhen === undefined ? undefined : readiness(options.readyWhen);
    Object.freeze(this);
  }

  with(changes) {
    return new ChildOptions({ update: this.update, onPrune: this.onPrune, readyWhen: this.readyWhen, ...changes });
  }

  /** Delete and create again when the API server refuses an update as immutable (a Job's template). */
  recreate() {
    return this.with({ update: 'recreate' });
  }

  /** Create when absent, never update. */
  createOnly() {
    return this.with({ update: 'create-only' });
  }

  /** Keep the object, without the host's owner reference and labels, once it is no longer returned. */
  orphanOnPrune() {
    return this.with({ onPrune: 'orphan' });
  }

  /**
   * A barrier: the children after this one wait until its `status.conditions` has
   * `conditionType` with status `True` (a Job's `Complete`).
   * @param {string} conditionType
   */
  readyWhenCondition(conditionType) {
    return this.with({ readyWhen: { condition: conditionType } });
  }

  /**
   * A barrier: the children after this one wait until the field at `path` (dotted, e.g.
   * `status.readyReplicas`) equals `value` (any JSON value).
   * @param {string} path
   * @param {unknown} value
   */
  readyWhenField(path, value) {
    if (value === undefined) throw new TypeError(`readyWhenField(${JSON.stringify(path)}) needs a value that JSON can hold`);
    return this.with({ readyWhen: { path, value: canonicalJson(value) } });
  }

  /** The contract's `child` record of `object` (JSON text) with these options. */
  toChild(object) {
    let readyWhen;
    if (this.readyWhen !== undefined) {
      readyWhen =
        'condition' in this.readyWhen
          ? { tag: 'condition', val: this.readyWhen.condition }
          : { tag: 'field-equals', val: { path: this.readyWhen.path, value: this.readyWhen.value } };
    }
    return { object, update: this.update, onPrune: this.onPrune, readyWhen };
  }
}

/** A frozen, checked copy of a readiness: `{condition}` or `{path, value}` (value as JSON text). */
function readiness(readyWhen) {
  if (typeof readyWhen?.condition === 'string' && readyWhen.condition !== '') {
    return Object.freeze({ condition: readyWhen.condition });
  }
  if (typeof readyWhen?.path === 'string' && readyWhen.path !== '' && typeof readyWhen.value === 'string') {
    return Object.freeze({ path: readyWhen.path, value: readyWhen.value });
  }
  throw new TypeError(
    `readyWhen must be {condition: "Type"} or {path: "status.field", value: "<JSON text>"}, got ${canonicalJson(readyWhen ?? null)}`,
  );
}

/** Apply in place, delete on prune, no barrier: what `desired.child` does. */
export const DEFAULT_CHILD_OPTIONS = new ChildOptions();

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Another kind of object a plugin reads (declared in `reconciler({related: [...]})`, read with
 * `observed.related(name)`): the host watches them, passes them with each call, and reconciles
 * the parents that refer to one when it changes.
 */
export class Related {
  /**
   * @param {string} name the key the objects come under (a DNS-1123 label, unique within the plugin)
   * @param {import('./children.js').Kind} kind
   * @param {{nameFromPath: string} | {labelSelector: string}} selector how they are chosen for a parent
   * @param {'data-hash'|'full'} [secretView] for Secrets: what of their data the plugin sees
   */
  constructor(name, kind, selector, secretView = 'data-hash') {
    if (typeof name !== 'string' || !DNS_LABEL.test(name)) {
      throw new TypeError(`a related resource's name must be a DNS-1123 label (e.g. "tls"), got ${JSON.stringify(name)}`);
    }
    if (typeof kind?.kind !== 'string' || typeof kind?.plural !== 'string') {
      throw new TypeError(`related ${name}: the kind must be a Kind (kinds.Secret, kindOf(...))`);
    }
    const bySelector = Object.keys(selector ?? {});
    if (!(bySelector.length === 1 && typeof selector[bySelector[0]] === 'string' && ['nameFromPath', 'labelSelector'].includes(bySelector[0]))) {
      throw new TypeError(`related ${name}: the selector must be {nameFromPath: "spec.x"} or {labelSelector: "app=web"}`);
    }
    this.name = name;
    this.kind = kind;
    this.selector = Object.freeze({ ...selector });
    this.secretView = oneOf(`related ${name}: secretView`, secretView, SECRET_VIEWS);
    Object.freeze(this);
  }

  /**
   * The object of `kind` named by the string at `path` in the parent (`spec.tls.secretName`);
   * none when the path is absent or empty.
   * @param {string} name
   * @param {import('./children.js').Kind} kind
   * @param {string} path
   */
  static byNameAt(name, kind, path) {
    return new Related(name, kind, { nameFromPath: path });
  }

  /**
   * Every object of `kind` matching the label `selector` (`app=web,tier in (a,b)`).
   * @param {string} name
   * @param {import('./children.js').Kind} kind
   * @param {string} selector
   */
  static byLabels(name, kind, selector) {
    return new Related(name, kind, { labelSelector: selector });
  }

  /** For a Secret: see its data in clear (the host's policy must allow it; the default is a hash of each value). */
  withSecretData() {
    return new Related(this.name, this.kind, this.selector, 'full');
  }

  /** The contract's `related-resource`. */
  toInfo() {
    const { group, version, kind, plural, namespaced } = this.kind;
    const selector =
      'nameFromPath' in this.selector
        ? { tag: 'name-from-path', val: this.selector.nameFromPath }
        : { tag: 'label-selector', val: this.selector.labelSelector };
    return { name: this.name, kind: { group, version, kind, plural, namespaced }, selector, secretView: this.secretView };
  }
}
