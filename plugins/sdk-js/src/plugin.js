// The parent kind's declaration (its CRD and the decoding of its objects) and the glue between the contract and a plugin's reconcile function.

import { FieldError, Validation, mergeApply, mergeDiff } from './admission.js';
import { Desired, Observed, apiVersionOf } from './children.js';
import { InvalidSpec, Retry } from './errors.js';
import { canonicalJson, parseJson } from './json.js';
import * as log from './log.js';
import { DEFAULT_CHILD_OPTIONS, Related } from './options.js';
import { DecodeError, Type, formatPath, t } from './schema.js';

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
      decoded = this.decodeExactly(object, (stale) =>
        log.warn(
          `the ${this.kind}'s previous status does not decode (${stale.message}); reconciling it as if it had none`,
        ),
      );
    } catch (error) {
      if (!(error instanceof DecodeError)) throw error;
      throw this.invalid(error);
    }
    const found = this.spec.check(decoded.spec, 'spec');
    if (found) throw new InvalidSpec(`${found[0]}: ${found[1]}`);
    return decoded;
  }

  invalid(error) {
    return new InvalidSpec(`the ${this.kind} does not match its schema: ${error.message}`);
  }

  /**
   * The parent object decoded as `decode` does, but not checked against the declared bounds:
   * what admission sees, as the Rust SDK's typed parent. A previous status that does not
   * decode is dropped (it is the plugin's own earlier output: refusing for it would stop every
   * spec change), after `onStaleStatus` is told why. Throws the `DecodeError` naming the
   * field that does not decode.
   * @param {any} object the parent as JSON (parsed)
   * @param {(error: DecodeError) => void} [onStaleStatus]
   */
  decodeExactly(object, onStaleStatus = () => {}) {
    let decoded;
    try {
      decoded = this.objectType.decode(object, undefined, []);
    } catch (first) {
      const isObject = typeof object === 'object' && object !== null && !Array.isArray(object);
      if (!(first instanceof DecodeError) || !isObject || !Object.hasOwn(object, 'status')) throw first;
      const withoutStatus = { ...object };
      delete withoutStatus.status;
      decoded = this.objectType.decode(withoutStatus, undefined, []);
      onStaleStatus(first);
    }
    return { apiVersion: this.apiVersion, kind: this.kind, ...decoded };
  }
}

/**
 * Declares the parent kind.
 * @param {ConstructorParameters<typeof ParentKind>[0]} declaration
 */
export function defineKind(declaration) {
  return new ParentKind(declaration);
}

/**
 * One CRD serving the versions of `crds` (each of one version, as `kind.crd()` gives them),
 * `storageVersion` stored: kube's `merge_crds`, so the CRD equals the Rust SDK's. Declare it
 * with `reconciler({crd, convert})`; the parent kind is the version `reconcile` decodes.
 * @param {object[]} crds
 * @param {string} storageVersion
 */
export function mergeCrds(crds, storageVersion) {
  if (!Array.isArray(crds) || crds.length === 0) throw new TypeError('mergeCrds needs the CRD of each version, got none');
  for (const crd of crds) {
    const versions = crd?.spec?.versions;
    if (!Array.isArray(versions) || versions.length !== 1) {
      throw new TypeError(`mergeCrds takes CRDs of one version each (kind.crd()), got one with ${versions?.length ?? 0}`);
    }
  }
  // Copied one level deep: the schemas are shared, and keep their JsonFloat bounds.
  const rest = crds.map((crd) => ({ ...crd, spec: { ...crd.spec, versions: [{ ...crd.spec.versions[0] }] } }));
  const index = rest.findIndex((crd) => crd.spec.versions[0].name === storageVersion);
  if (index < 0) {
    const names = rest.map((crd) => crd.spec.versions[0].name).join(', ');
    throw new TypeError(`mergeCrds: the storage version ${JSON.stringify(storageVersion)} is not one of the versions given (${names})`);
  }
  const [root] = rest.splice(index, 1);
  root.spec.versions[0].storage = true;
  for (const crd of rest) {
    for (const field of ['group', 'scope']) {
      if (crd.spec[field] !== root.spec[field]) {
        throw new TypeError(`mergeCrds: version ${crd.spec.versions[0].name} has ${field} ${JSON.stringify(crd.spec[field])}, the storage version ${JSON.stringify(root.spec[field])}`);
      }
    }
    if (crd.spec.names.kind !== root.spec.names.kind) {
      throw new TypeError(`mergeCrds: version ${crd.spec.versions[0].name} is of kind ${crd.spec.names.kind}, the storage version of ${root.spec.names.kind}`);
    }
  }
  // As kube: the other versions are taken from the end of the list.
  for (const crd of rest.reverse()) root.spec.versions.push({ ...crd.spec.versions[0], storage: false });
  return root;
}

const isContractError = (error, name) => error?.name === name;

/** The message of an error the author threw on purpose (`InvalidSpec`, `Retry`), or undefined for a bug. */
function refusal(error) {
  if (error instanceof InvalidSpec || error instanceof Retry || isContractError(error, 'InvalidSpec') || isContractError(error, 'Retry')) {
    return String(error.message);
  }
  return undefined;
}

/** The contract's error variant for an error a plugin threw, or undefined for a bug. */
function contractError(error) {
  if (error instanceof InvalidSpec || isContractError(error, 'InvalidSpec')) return { tag: 'invalid-spec', val: String(error.message) };
  if (error instanceof Retry || isContractError(error, 'Retry')) return { tag: 'retry', val: String(error.message) };
  return undefined;
}

/**
 * Runs `f`; an error `expected` maps (to what the contract returns as its error) is thrown
 * so mapped; anything else is a bug, as a Rust panic is: it traps (the host reports
 * PluginTrap), after saying what it was through the host's log.
 */
function guarded(f, expected = contractError) {
  try {
    return f();
  } catch (error) {
    const mapped = expected(error);
    if (mapped !== undefined) throw mapped;
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

/** `kind` as the contract declares it (a copy, without other properties). */
const gvkOf = ({ group, version, kind, plural, namespaced }) => ({ group, version, kind, plural, namespaced });

/** `text` parsed, or the refusal `the object is not JSON: ...` (default and convert). */
function parseObject(text) {
  try {
    return parseJson(text);
  } catch (e) {
    throw new InvalidSpec(`the object is not JSON: ${e.message}`);
  }
}

/**
 * The plugin: what the module exports as `plugin` (the contract's `info`, `reconcile`,
 * `finalize`, `validate`, `default` and `convert`), built from the parent kind, the child
 * kinds and the author's functions. Each of `validate`, `validateDelete`, `default` and
 * `convert` given sets its flag in `info().implements`, so the host calls it; the ones not
 * given are exported as functions the host never calls.
 *
 * @param {object} definition
 * @param {string} definition.name a DNS-1123 label, unique among a host's plugins
 * @param {string} definition.version a semantic version
 * @param {ParentKind} definition.parent the kind, in the version `reconcile` decodes
 * @param {import('./children.js').Kind[]} definition.children every kind `reconcile` may return
 * @param {Related[]} [definition.related] other objects the plugin reads (`observed.related(name)`)
 * @param {object} [definition.crd] the CRD, when it is not `parent.crd()`: one of several
 *   versions (`mergeCrds`), which needs `convert`
 * @param {(parent: any, observed: Observed) => Desired} definition.reconcile
 * @param {(parent: any, observed: Observed) => {done: boolean, requeueAfterMs?: number}} [definition.finalize]
 *   called before a parent is deleted when given (the host then puts a finalizer on every parent)
 * @param {(parent: any, old: any | undefined) => Validation} [definition.validate]
 *   admission of a create (`old` undefined) or an update
 * @param {(old: any) => Validation} [definition.validateDelete] admission of a delete
 * @param {(parent: any) => any} [definition.default] fills in defaults in `parent` (changed in
 *   place, or returned); only the fields it changes change in the stored object
 * @param {(object: any, toVersion: string) => any} [definition.convert] `object` (of any
 *   version the CRD serves) as `toVersion`, `apiVersion` included
 */
export function reconciler(definition) {
  const { name, version, parent, children, reconcile, finalize, validate, validateDelete, convert } = definition;
  const defaulter = definition.default;
  const related = definition.related ?? [];
  if (!(parent instanceof ParentKind)) throw new TypeError('parent must come from defineKind(...)');
  if (typeof reconcile !== 'function') throw new TypeError('reconcile must be a function');
  for (const [field, f] of Object.entries({ finalize, validate, validateDelete, default: defaulter, convert })) {
    if (f !== undefined && typeof f !== 'function') throw new TypeError(`${field} must be a function when given`);
  }
  if (!Array.isArray(related) || related.some((r) => !(r instanceof Related))) {
    throw new TypeError('related must be a list of Related (Related.byNameAt(...), Related.byLabels(...))');
  }
  const relatedNames = related.map((r) => r.name);
  const repeated = relatedNames.find((n, i) => relatedNames.indexOf(n) !== i);
  if (repeated !== undefined) throw new TypeError(`related ${repeated} is declared twice: each related resource needs a name of its own`);
  const crd = definition.crd ?? parent.crd();
  const served = (crd?.spec?.versions ?? []).filter((v) => v.served !== false).map((v) => v.name);
  if (served.length > 1 && typeof convert !== 'function') {
    throw new TypeError(`the CRD serves ${served.length} versions (${served.join(', ')}): the plugin needs convert(object, toVersion)`);
  }
  const declared = children.map((k) => `${apiVersionOf(k)}/${k.kind}`);

  const decodeRequest = (request) => {
    let object;
    try {
      object = parseJson(request.parent);
    } catch (e) {
      throw new Retry(`the parent is not valid JSON: ${e.message}`);
    }
    return [parent.decode(object), Observed.fromJson(request.observed, request.related ?? [])];
  };

  const checked = (desired) => {
    if (!(desired instanceof Desired)) throw new TypeError('reconcile must return a Desired');
    return desired;
  };

  // The host refuses a child of a kind not declared; a unit test learns it here, in the host's words.
  const checkKinds = (desired) => {
    for (const child of desired.children) {
      const kind = `${child.apiVersion}/${child.kind}`;
      if (!declared.includes(kind)) {
        throw new TypeError(`${kind} ${JSON.stringify(child.metadata?.name ?? '')} is not a kind the plugin declared (${declared.join(', ')})`);
      }
    }
    return desired;
  };

  /** A parsed JSON copy, as a request carries objects (`undefined` members gone, numbers as written). */
  const asRequest = (object) => parseJson(canonicalJson(object));

  /**
   * Decode, reconcile, check the answer: the path of every call, for tests with plain objects.
   * @param {object} parentObject
   * @param {object[]} [observedObjects]
   * @param {Record<string, object[]>} [relatedObjects] by the related resource's name
   */
  const run = (parentObject, observedObjects = [], relatedObjects = {}) => {
    const decoded = parent.decode(asRequest(parentObject));
    const observed = new Observed(observedObjects.map(asRequest));
    for (const [key, objects] of Object.entries(relatedObjects)) observed.withRelated(key, objects.map(asRequest));
    return checkKinds(checked(reconcile(decoded, observed)));
  };

  /**
   * The parent `object` (parsed JSON) as `validate` gets it, or undefined with the field error
   * of what does not decode added to `validation`.
   */
  const admitted = (object, validation) => {
    try {
      return parent.decodeExactly(object);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      validation.error(new FieldError({ reason: 'invalid', field: formatPath(e.path), detail: e.problem }));
      return undefined;
    }
  };

  /** What the author's `f` answers; an `InvalidSpec` it throws is its field error. */
  const authors = (what, f) => {
    let answer;
    try {
      answer = f();
    } catch (e) {
      if (e instanceof InvalidSpec || isContractError(e, 'InvalidSpec')) return new Validation().check(e);
      throw e;
    }
    if (!(answer instanceof Validation)) throw new TypeError(`${what} must return a Validation (new Validation()...)`);
    return answer;
  };

  /**
   * The validation of a create (`old` undefined) or an update of `object` (parsed JSON): a
   * parent that does not decode is refused with the field that does not; then the author's
   * `validate`; then, when it refused nothing, the declared bounds, as `reconcile` checks them.
   */
  const validation = (object, old) => {
    const refused = new Validation();
    const decoded = admitted(object, refused);
    if (decoded === undefined) return refused;
    // An old object that no longer decodes (a schema changed since) is no reason to refuse
    // the new one: it is validated as a create.
    const previous = old === undefined ? undefined : admitted(old, new Validation());
    const answer = validate ? authors('validate', () => validate(decoded, previous)) : new Validation();
    if (answer.isValid) {
      const found = parent.spec.check(decoded.spec, 'spec');
      if (found) answer.error(new FieldError({ reason: 'invalid', field: found[0], detail: found[1] }));
    }
    return answer;
  };

  /** The validation of the deletion of `old` (parsed JSON). */
  const deletion = (old) => {
    const decoded = old === undefined ? undefined : admitted(old, new Validation());
    if (decoded === undefined || !validateDelete) return new Validation();
    return authors('validateDelete', () => validateDelete(decoded));
  };

  /**
   * `object` (parsed JSON) with only the fields the author's `default` changed changed, so
   * that what the parent kind does not declare stays as the user wrote it; undefined when
   * nothing changed. An object that does not decode is left alone, for `validate` to refuse.
   */
  const defaulted = (object) => {
    if (!defaulter) return undefined;
    let decoded;
    try {
      decoded = parent.decodeExactly(asRequest(object));
    } catch (e) {
      if (e instanceof DecodeError) return undefined;
      throw e;
    }
    const before = asRequest(decoded);
    const returned = defaulter(decoded);
    const patch = mergeDiff(before, asRequest(returned === undefined ? decoded : returned));
    return patch === undefined ? undefined : mergeApply(object, patch);
  };

  /** `object` (parsed JSON) converted to `toVersion`. */
  const converted = (object, toVersion) => {
    if (!convert) throw new InvalidSpec(`this plugin does not convert between versions (asked for ${toVersion})`);
    const answer = convert(object, toVersion);
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
      throw new TypeError(`convert must return the converted object, got ${canonicalJson(answer ?? null)}`);
    }
    return answer;
  };

  // Computed once, when the module is evaluated: inside the component that is at build time
  // (the engine's snapshot holds it), so the host's `info` call, which has a short deadline,
  // only copies it out.
  const info = {
    name,
    version,
    parent: parent.gvk,
    children: children.map(gvkOf),
    needsFinalize: typeof finalize === 'function',
    crd: canonicalJson(crd),
    related: related.map((r) => r.toInfo()),
    implements: {
      validate: typeof validate === 'function',
      validateDelete: typeof validateDelete === 'function',
      default: typeof defaulter === 'function',
      convert: typeof convert === 'function',
    },
  };

  return {
    name,
    version,
    parent,
    children: [...children],
    related: [...related],
    run,
    /** Validates a create (`old` undefined) or an update of plain objects, as a call does: for unit tests. */
    runValidate: (object, old) => validation(asRequest(object), old === undefined ? undefined : asRequest(old)),
    /** Validates the deletion of a plain object, as a call does. */
    runValidateDelete: (old) => deletion(asRequest(old)),
    /** A plain object defaulted, as a call does (the object itself when nothing changes). */
    runDefault: (object) => defaulted(asRequest(object)) ?? asRequest(object),
    /** A plain object converted, as a call does; throws the `InvalidSpec` or `Retry` that refuses it. */
    runConvert: (object, toVersion) => asRequest(converted(asRequest(object), toVersion)),
    info() {
      // A copy: the caller may change it. `info` holds only strings, booleans, lists and objects.
      return JSON.parse(JSON.stringify(info));
    },
    reconcile(request) {
      return guarded(() => {
        const [decoded, observed] = decodeRequest(request);
        const desired = checked(reconcile(decoded, observed));
        return {
          children: desired.children.map((c, i) => (desired.options[i] ?? DEFAULT_CHILD_OPTIONS).toChild(canonicalJson(c))),
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
    validate(request) {
      // No error variant: an author's error other than an InvalidSpec is a bug, and traps.
      return guarded(() => {
        const parse = (text, validation) => {
          if (text === undefined || text === null) return undefined;
          try {
            return parseJson(text);
          } catch (e) {
            validation.invalid('', null, `not JSON: ${e.message}`);
            return undefined;
          }
        };
        if (request.operation === 'delete') return deletion(parse(request.oldObject, new Validation())).toContract();
        const refused = new Validation();
        const object = parse(request.object, refused);
        if (object === undefined) return refused.toContract();
        return validation(object, parse(request.oldObject, new Validation())).toContract();
      }, () => undefined);
    },
    default(object) {
      return guarded(() => {
        const changed = defaulted(parseObject(object));
        return changed === undefined ? object : canonicalJson(changed);
      }, refusal);
    },
    convert(object, toVersion) {
      return guarded(() => canonicalJson(converted(parseObject(object), toVersion)), refusal);
    },
  };
}
