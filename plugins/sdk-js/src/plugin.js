// The parent kind's declaration (its CRD and the decoding of its objects) and the glue between the contract and a plugin's reconcile function.

import { Desired, Observed } from './children.js';
import { InvalidSpec, Retry } from './errors.js';
import { canonicalJson, parseJson } from './json.js';
import * as log from './log.js';
import { DecodeError, Type, t } from './schema.js';

const str = () => t.optional(t.string());
const i64 = () => t.optional(t.integer({ format: 'int64' }));

/** `metadata` as k8s-openapi's ObjectMeta decodes it: every field optional, each of its type. */
const OBJECT_META = t.object(
  {
    annotations: t.optional(t.map(t.string())),
    creationTimestamp: str(),
    deletionGracePeriodSeconds: i64(),
    deletionTimestamp: str(),
    finalizers: t.optional(t.array(t.string())),
    generateName: str(),
    generation: i64(),
    labels: t.optional(t.map(t.string())),
    managedFields: t.optional(
      t.array(
        t.object(
          {
            apiVersion: str(),
            fieldsType: str(),
            fieldsV1: t.optional(t.ref({})),
            manager: str(),
            operation: str(),
            subresource: str(),
            time: str(),
          },
          { expecting: 'ManagedFieldsEntry' },
        ),
      ),
    ),
    name: str(),
    namespace: str(),
    ownerReferences: t.optional(
      t.array(
        t.object(
          // k8s-openapi reads a missing or null required field as its default: none is required.
          {
            apiVersion: str(),
            blockOwnerDeletion: t.optional(t.boolean()),
            controller: t.optional(t.boolean()),
            kind: str(),
            name: str(),
            uid: str(),
          },
          { expecting: 'OwnerReference' },
        ),
      ),
    ),
    resourceVersion: str(),
    selfLink: str(),
    uid: str(),
  },
  { expecting: 'ObjectMeta' },
);

/**
 * @typedef {object} PrinterColumn A column of `kubectl get`.
 * @property {string} name
 * @property {'integer'|'number'|'string'|'boolean'|'date'} type
 * @property {string} jsonPath
 * @property {number} [priority]
 * @property {string} [description]
 * @property {string} [format]
 */

/**
 * The kind a plugin reconciles, declared once: its CRD and the decoding of its objects (spec
 * validated, status dropped when it no longer decodes) both come from this.
 */
export class ParentKind {
  /**
   * @param {object} declaration
   * @param {string} declaration.group
   * @param {string} declaration.version
   * @param {string} declaration.kind
   * @param {string} declaration.plural
   * @param {string} [declaration.singular] default: the kind in lower case
   * @param {string[]} [declaration.shortNames]
   * @param {string[]} [declaration.categories]
   * @param {boolean} [declaration.namespaced] default: true
   * @param {PrinterColumn[]} [declaration.printerColumns]
   * @param {string} [declaration.description] of the whole object in the CRD
   * @param {import('./schema.js').Type} declaration.spec `t.object(...)`
   * @param {import('./schema.js').Type} [declaration.status] `t.object(...)`; gives the CRD a status subresource
   */
  constructor(declaration) {
    const { group, version, kind, plural } = declaration;
    for (const [field, value] of Object.entries({ group, version, kind, plural })) {
      if (typeof value !== 'string' || value === '') throw new TypeError(`the parent kind needs a ${field}`);
    }
    if (!(declaration.spec instanceof Type)) throw new TypeError('the parent kind needs a spec: t.object(...)');
    this.group = group;
    this.version = version;
    this.kind = kind;
    this.plural = plural;
    this.namespaced = declaration.namespaced ?? true;
    this.singular = declaration.singular ?? kind.toLowerCase();
    this.shortNames = declaration.shortNames ?? [];
    this.categories = declaration.categories ?? [];
    this.printerColumns = declaration.printerColumns ?? [];
    this.description = declaration.description;
    // Named as the Rust derive names them, for serde's `expected struct MemcachedSpec`.
    this.spec = typeof declaration.spec.named === 'function' ? declaration.spec.named(`${kind}Spec`) : declaration.spec;
    this.status =
      declaration.status && typeof declaration.status.named === 'function'
        ? declaration.status.named(`${kind}Status`)
        : declaration.status;
    const properties = { metadata: OBJECT_META, spec: this.spec };
    if (this.status !== undefined) {
      properties.status = t.optional(this.status);
      // kube's root `status` has no serde default: a list of the root's fields must hold it.
      properties.status.seqDefault = false;
    }
    this.objectType = t.object(properties, { required: ['metadata', 'spec'], name: kind });
  }

  /** `apiVersion` of the parent's objects. */
  get apiVersion() {
    return `${this.group}/${this.version}`;
  }

  /** The kind as the contract declares it. */
  get gvk() {
    return { group: this.group, version: this.version, kind: this.kind, plural: this.plural, namespaced: this.namespaced };
  }

  /** The CustomResourceDefinition (apiextensions.k8s.io/v1), as the Rust SDK's kube derive writes it. */
  crd() {
    const names = { kind: this.kind, plural: this.plural, singular: this.singular };
    if (this.categories.length > 0) names.categories = [...this.categories];
    if (this.shortNames.length > 0) names.shortNames = [...this.shortNames];
    const root = { type: 'object', title: this.kind, properties: { spec: this.spec.schema() }, required: ['spec'] };
    if (this.description !== undefined) root.description = this.description;
    if (this.status !== undefined) root.properties.status = { ...this.status.schema(), nullable: true };
    const version = { name: this.version, served: true, storage: true, schema: { openAPIV3Schema: root } };
    if (this.printerColumns.length > 0) version.additionalPrinterColumns = this.printerColumns.map((c) => ({ ...c }));
    if (this.status !== undefined) version.subresources = { status: {} };
    return {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${this.plural}.${this.group}` },
      spec: {
        group: this.group,
        names,
        scope: this.namespaced ? 'Namespaced' : 'Cluster',
        versions: [version],
      },
    };
  }

  /**
   * The parent object decoded: defaults filled in, bounds checked (`InvalidSpec` naming the
   * field). A previous status that does not decode (a phase renamed in a new version) is
   * dropped with a warning, so the parent gets a new status instead of failing forever.
   * @param {any} object the parent as JSON (parsed)
   * @returns {{apiVersion: string, kind: string, metadata: any, spec: any, status?: any}}
   */
  decode(object) {
    let decoded;
    try {
      decoded = this.objectType.decode(object, undefined, []);
    } catch (first) {
      if (!(first instanceof DecodeError)) throw first;
      const isObject = typeof object === 'object' && object !== null && !Array.isArray(object);
      if (!isObject || !Object.hasOwn(object, 'status')) throw this.invalid(first);
      const withoutStatus = { ...object };
      delete withoutStatus.status;
      try {
        decoded = this.objectType.decode(withoutStatus, undefined, []);
      } catch (second) {
        if (!(second instanceof DecodeError)) throw second;
        throw this.invalid(second);
      }
      log.warn(
        `the ${this.kind}'s previous status does not decode (${first.message}); reconciling it as if it had none`,
      );
    }
    const found = this.spec.check(decoded.spec, 'spec');
    if (found) throw new InvalidSpec(`${found[0]}: ${found[1]}`);
    return { apiVersion: this.apiVersion, kind: this.kind, ...decoded };
  }

  invalid(error) {
    return new InvalidSpec(`the ${this.kind} does not match its schema: ${error.message}`);
  }
}

/**
 * Declares the parent kind.
 * @param {ConstructorParameters<typeof ParentKind>[0]} declaration
 */
export function defineKind(declaration) {
  return new ParentKind(declaration);
}

/** The contract's error variant for an error a plugin threw, or undefined for a bug. */
function contractError(error) {
  if (error instanceof InvalidSpec || error?.name === 'InvalidSpec') return { tag: 'invalid-spec', val: String(error.message) };
  if (error instanceof Retry || error?.name === 'Retry') return { tag: 'retry', val: String(error.message) };
  return undefined;
}

/** Runs `f`, turning InvalidSpec and Retry into the contract's error and logging a bug before it traps. */
function guarded(f) {
  try {
    return f();
  } catch (error) {
    const mapped = contractError(error);
    if (mapped) throw mapped;
    // Anything else is a bug, as a Rust panic is: it traps (the host reports PluginTrap),
    // after saying what it was through the host's log.
    log.error(`the plugin failed: ${error?.stack ?? error}`);
    throw error;
  }
}

function toU64(ms, what) {
  if (ms === undefined || ms === null) return undefined;
  if (typeof ms === 'bigint') return ms;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw new TypeError(`${what} must be a number of milliseconds`);
  return BigInt(Math.floor(ms));
}

/**
 * The plugin: what the module exports as `plugin` (the contract's `info`, `reconcile` and
 * `finalize`), built from the parent kind, the child kinds and the reconcile function.
 *
 * @param {object} definition
 * @param {string} definition.name a DNS-1123 label, unique among a host's plugins
 * @param {string} definition.version a semantic version
 * @param {ParentKind} definition.parent
 * @param {import('./children.js').Kind[]} definition.children every kind `reconcile` may return
 * @param {(parent: any, observed: Observed) => Desired} definition.reconcile
 * @param {(parent: any, observed: Observed) => {done: boolean, requeueAfterMs?: number}} [definition.finalize]
 *   called before a parent is deleted when given (the host then puts a finalizer on every parent)
 */
export function reconciler(definition) {
  const { name, version, parent, children, reconcile, finalize } = definition;
  if (!(parent instanceof ParentKind)) throw new TypeError('parent must come from defineKind(...)');
  if (typeof reconcile !== 'function') throw new TypeError('reconcile must be a function');

  const decodeRequest = (request) => {
    let object;
    try {
      object = parseJson(request.parent);
    } catch (e) {
      throw new Retry(`the parent is not valid JSON: ${e.message}`);
    }
    return [parent.decode(object), Observed.fromJson(request.observed)];
  };

  /** Decode, reconcile, check the answer: the path of every call, for tests with plain objects. */
  const run = (parentObject, observedObjects = []) => {
    const decoded = parent.decode(parseJson(canonicalJson(parentObject)));
    const observed = new Observed(observedObjects.map((o) => parseJson(canonicalJson(o))));
    return checked(reconcile(decoded, observed));
  };

  // Computed once, when the module is evaluated: inside the component that is at build time
  // (the engine's snapshot holds it), so the host's `info` call, which has a short deadline,
  // only copies it out.
  const info = {
    name,
    version,
    parent: parent.gvk,
    children: children.map((k) => ({ group: k.group, version: k.version, kind: k.kind, plural: k.plural, namespaced: k.namespaced })),
    needsFinalize: typeof finalize === 'function',
    crd: canonicalJson(parent.crd()),
  };

  const checked = (desired) => {
    if (!(desired instanceof Desired)) throw new TypeError('reconcile must return a Desired');
    return desired;
  };

  return {
    name,
    version,
    parent,
    children: [...children],
    run,
    info() {
      return { ...info, parent: { ...info.parent }, children: info.children.map((k) => ({ ...k })) };
    },
    reconcile(request) {
      return guarded(() => {
        const [decoded, observed] = decodeRequest(request);
        const desired = checked(reconcile(decoded, observed));
        return {
          children: desired.children.map((c) => canonicalJson(c)),
          status: canonicalJson(desired.status),
          requeueAfterMs: toU64(desired.requeueAfterMs, 'requeueAfterMs'),
        };
      });
    },
    finalize(request) {
      return guarded(() => {
        const [decoded, observed] = decodeRequest(request);
        if (typeof finalize !== 'function') return { done: true, requeueAfterMs: undefined };
        const result = finalize(decoded, observed);
        if (result?.done) return { done: true, requeueAfterMs: undefined };
        return { done: false, requeueAfterMs: toU64(result?.requeueAfterMs ?? 0, 'requeueAfterMs') };
      });
    },
  };
}
