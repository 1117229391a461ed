// Kinds, the children the host observed, and the children and status a plugin desires.

import { Retry } from './errors.js';
import { canonicalJson, parseJson, rustDebugString } from './json.js';
import { ChildOptions, DEFAULT_CHILD_OPTIONS } from './options.js';
import { CONTENT_HASH_ANNOTATION, Rollout, WorkloadView, contentHash, stampSpecHash } from './view.js';

/**
 * @typedef {object} Kind A Kubernetes kind a plugin reconciles or creates.
 * @property {string} group API group; empty for the core group
 * @property {string} version API version within the group
 * @property {string} kind e.g. `Deployment`
 * @property {string} plural e.g. `deployments`
 * @property {boolean} namespaced whether objects of this kind live in a namespace
 */

/**
 * A kind descriptor.
 * @param {string} group
 * @param {string} version
 * @param {string} kind
 * @param {string} plural
 * @param {boolean} [namespaced]
 * @returns {Kind}
 */
export function kindOf(group, version, kind, plural, namespaced = true) {
  return Object.freeze({ group, version, kind, plural, namespaced });
}

/**
 * `apiVersion` as objects carry it: `group/version`, or `version` for the core group.
 * @param {Kind} kind
 */
export function apiVersionOf(kind) {
  return kind.group === '' ? kind.version : `${kind.group}/${kind.version}`;
}

/** The kinds plugins create most, as k8s-openapi describes them. */
export const kinds = Object.freeze({
  ConfigMap: kindOf('', 'v1', 'ConfigMap', 'configmaps'),
  PersistentVolumeClaim: kindOf('', 'v1', 'PersistentVolumeClaim', 'persistentvolumeclaims'),
  Pod: kindOf('', 'v1', 'Pod', 'pods'),
  Secret: kindOf('', 'v1', 'Secret', 'secrets'),
  Service: kindOf('', 'v1', 'Service', 'services'),
  ServiceAccount: kindOf('', 'v1', 'ServiceAccount', 'serviceaccounts'),
  DaemonSet: kindOf('apps', 'v1', 'DaemonSet', 'daemonsets'),
  Deployment: kindOf('apps', 'v1', 'Deployment', 'deployments'),
  ReplicaSet: kindOf('apps', 'v1', 'ReplicaSet', 'replicasets'),
  StatefulSet: kindOf('apps', 'v1', 'StatefulSet', 'statefulsets'),
  HorizontalPodAutoscaler: kindOf('autoscaling', 'v2', 'HorizontalPodAutoscaler', 'horizontalpodautoscalers'),
  CronJob: kindOf('batch', 'v1', 'CronJob', 'cronjobs'),
  Job: kindOf('batch', 'v1', 'Job', 'jobs'),
  Ingress: kindOf('networking.k8s.io', 'v1', 'Ingress', 'ingresses'),
  NetworkPolicy: kindOf('networking.k8s.io', 'v1', 'NetworkPolicy', 'networkpolicies'),
  PodDisruptionBudget: kindOf('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets'),
  Role: kindOf('rbac.authorization.k8s.io', 'v1', 'Role', 'roles'),
  RoleBinding: kindOf('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings'),
});

const JOB = kinds.Job;

/**
 * Metadata for a child: its name and labels only. The host adds the namespace, the owner
 * reference and its ownership labels; a plugin that sets them itself is rejected.
 * @param {string} name
 * @param {Record<string, string>} [labels]
 */
export function childMeta(name, labels = {}) {
  const meta = { name };
  if (Object.keys(labels).length > 0) meta.labels = { ...labels };
  return meta;
}

/**
 * The object's name, or its `generateName` prefix while it has none (a create at admission,
 * before the API server names it); `''` without either. kube's `ResourceExt::name_any`.
 * @param {{metadata?: {name?: string, generateName?: string}}} object a parent or any child
 * @returns {string}
 */
export function nameAny(object) {
  return object?.metadata?.name || object?.metadata?.generateName || '';
}

function isKind(object, kind) {
  return object?.apiVersion === apiVersionOf(kind) && object?.kind === kind.kind;
}

function nameOf(object) {
  const name = object?.metadata?.name;
  return typeof name === 'string' ? name : undefined;
}

/** The objects of a request's JSON texts; `what` names them in the error (`observed child #1 is not valid JSON: ...`). */
function parseAll(texts, what) {
  return texts.map((text, index) => {
    try {
      return parseJson(text);
    } catch (e) {
      throw new Retry(`${what} #${index} is not valid JSON: ${e.message}`);
    }
  });
}

/**
 * The children the host observed for one parent, as read from the API server, and the
 * related objects the plugin declared (`reconciler({related})`).
 */
export class Observed {
  /**
   * @param {object[]} [objects] parsed JSON objects
   * @param {Record<string, object[]>} [related] the related objects by their declaration's name
   */
  constructor(objects = [], related = {}) {
    this.objects = objects;
    /** @type {Map<string, object[]>} */
    this.relatedObjects = new Map(Object.entries(related));
  }

  /**
   * Observed children and related objects from the JSON texts of a request.
   * @param {string[]} texts
   * @param {{name: string, objects: string[]}[]} [related] the request's `related`
   */
  static fromJson(texts, related = []) {
    const observed = new Observed(parseAll(texts, 'observed child'));
    for (const { name, objects } of related) observed.withRelated(name, parseAll(objects, `related ${name}`));
    return observed;
  }

  /**
   * Sets the related objects declared as `name` (for tests); returns this observed.
   * @param {string} name
   * @param {object[]} objects parsed JSON objects
   */
  withRelated(name, objects) {
    this.relatedObjects.set(name, objects);
    return this;
  }

  /**
   * The related objects declared as `name` (`Related.byNameAt(name, ...)`): as JSON, or each
   * decoded by `type` (a schema type, or a class with a static `decode(object)`) when given,
   * a `Retry` error naming the one that does not decode. Empty when none matches (a name
   * that was not declared is empty too).
   * @param {string} name
   * @param {{decode: Function}} [type]
   * @returns {any[]}
   */
  related(name, type) {
    const objects = this.relatedObjects.get(name) ?? [];
    if (type === undefined) return objects;
    return objects.map((object) => decodeObserved({ kind: typeof object?.kind === 'string' ? object.kind : name }, object, type));
  }

  /**
   * The observed child of `kind` named `name`, as JSON, if there is one.
   * @param {import('./children.js').Kind} kind
   * @param {string} name
   * @returns {any | undefined}
   */
  get(kind, name) {
    return this.objects.find((o) => isKind(o, kind) && nameOf(o) === name);
  }

  /**
   * The observed child of `kind` named `name` decoded by `type` (a schema type, or a class
   * with a static `decode(object)`), if there is one. A child that is there but does not
   * decode is a `Retry` error, never `undefined`.
   * @param {import('./children.js').Kind} kind
   * @param {string} name
   * @param {{decode: Function}} type
   */
  view(kind, name, type) {
    const object = this.get(kind, name);
    if (object === undefined) return undefined;
    return decodeObserved(kind, object, type);
  }

  /**
   * Where the rollout (or, for a Job, the run) of the spec `desired` holds for the workload
   * of `kind` named `name` stands: `WorkloadView.rolloutOf(desired)` of the observed one, or
   * pending (reason `NotCreated`) while there is none. One that does not decode is a `Retry`.
   * @param {import('./children.js').Kind} kind
   * @param {string} name
   * @param {Desired} desired
   * @returns {Rollout}
   */
  rolloutOf(kind, name, desired) {
    const workload = this.view(kind, name, WorkloadView);
    if (workload !== undefined) return workload.rolloutOf(desired);
    return Rollout.pending('NotCreated', `the ${kind.kind} ${rustDebugString(name)} is not created yet`);
  }

  /**
   * Every observed child of `kind`.
   * @param {import('./children.js').Kind} kind
   */
  all(kind) {
    return this.objects.filter((o) => isKind(o, kind));
  }

  /** Number of observed children of any kind. */
  get length() {
    return this.objects.length;
  }
}

/** `object`, an observed child of `kind`, decoded by `type`, or a `Retry` error. */
export function decodeObserved(kind, object, type) {
  try {
    return type.decode(object, undefined, []);
  } catch (e) {
    if (e?.name !== 'DecodeError') throw e;
    // Decoded from a whole JSON value, serde's error has no path: the Rust SDK's says the same.
    throw new Retry(`observed ${kind.kind} ${JSON.stringify(nameOf(object) ?? '')} does not decode: ${e.problem}`);
  }
}

/** What `reconcile` returns: the children that should exist, the status, and when to call again. */
export class Desired {
  constructor() {
    /** @type {any[]} the desired children as JSON objects (with `apiVersion` and `kind`) */
    this.children = [];
    /** @type {object} the parent's status */
    this.status = {};
    /** @type {number | undefined} call again after this many milliseconds */
    this.requeueAfterMs = undefined;
    /** @type {ChildOptions[]} how the host handles each child, by index in `children` */
    this.options = [];
  }

  /**
   * Adds a child: `child(kinds.Deployment, {metadata, spec})`, or `child(object)` with its
   * own `apiVersion` and `kind`. A workload (Deployment, StatefulSet, DaemonSet, ReplicaSet,
   * Job) gets the annotation `SPEC_HASH_ANNOTATION`, the hash of its spec, so that its
   * observed copy tells whether it carries this spec yet (`WorkloadView.rolloutOf`).
   * @param {import('./children.js').Kind | object} kindOrObject
   * @param {object} [object]
   * @returns {this}
   */
  child(kindOrObject, object) {
    return this.childWith(kindOrObject, object, DEFAULT_CHILD_OPTIONS);
  }

  /**
   * Adds a child that the host applies, prunes or waits for as `options` say (an update
   * strategy, a delete policy, a readiness barrier for the children added after it):
   * `childWith(kinds.Job, job, new ChildOptions().recreate().readyWhenCondition('Complete'))`,
   * or `childWith(object, options)` for an object with its own `apiVersion` and `kind`.
   * @param {import('./children.js').Kind | object} kindOrObject
   * @param {object | ChildOptions} objectOrOptions
   * @param {ChildOptions} [options]
   * @returns {this}
   */
  childWith(kindOrObject, objectOrOptions, options) {
    let object = objectOrOptions;
    if (options === undefined && objectOrOptions instanceof ChildOptions) {
      options = objectOrOptions;
      object = undefined;
    }
    if (!(options instanceof ChildOptions)) {
      throw new TypeError('childWith takes the child and a ChildOptions (new ChildOptions().recreate(), ...)');
    }
    let value;
    if (object === undefined) {
      value = kindOrObject;
    } else {
      value = { ...object };
      value.apiVersion ??= apiVersionOf(kindOrObject);
      value.kind ??= kindOrObject.kind;
    }
    if (typeof value?.apiVersion !== 'string' || typeof value?.kind !== 'string') {
      throw new TypeError('a child needs apiVersion and kind (pass its Kind first)');
    }
    // A copy as JSON holds it: the plugin's later changes do not change what was hashed, and
    // `undefined` members are gone, as `None`s are from a Rust child.
    const child = parseJson(canonicalJson(value));
    stampSpecHash(child);
    this.children.push(child);
    // Children pushed onto `children` directly have no entry: pad with the default.
    while (this.options.length < this.children.length - 1) this.options.push(DEFAULT_CHILD_OPTIONS);
    this.options.push(options);
    return this;
  }

  /**
   * Adds the Job `job` as a step the children added after it wait for, run once for each
   * distinct `inputs` (whatever its run depends on: the image, a schema version). The hash of
   * `inputs` goes on the pod template under `CONTENT_HASH_ANNOTATION`, so new inputs make a
   * new template and the host recreates the Job (its template is immutable); the same inputs
   * leave the completed Job as it is. The barrier is its `Complete` condition;
   * `observed.rolloutOf(kinds.Job, name, desired)` says whether the run of *these* inputs
   * completed (an old Job's completion is `SpecNotApplied`).
   * @param {object} job the Job's `metadata` and `spec` (its kind is implied)
   * @param {unknown} inputs
   * @returns {this}
   */
  runOnce(job, inputs) {
    const copy = parseJson(canonicalJson(job));
    copy.spec ??= {};
    copy.spec.template ??= {};
    copy.spec.template.metadata ??= {};
    copy.spec.template.metadata.annotations ??= {};
    copy.spec.template.metadata.annotations[CONTENT_HASH_ANNOTATION] = contentHash(inputs);
    return this.childWith(JOB, copy, DEFAULT_CHILD_OPTIONS.recreate().readyWhenCondition('Complete'));
  }

  /**
   * The options of the desired child of `kind` named `name`, if it is desired.
   * @param {import('./children.js').Kind} kind
   * @param {string} name
   * @returns {ChildOptions | undefined}
   */
  optionsOf(kind, name) {
    const index = this.children.findIndex((o) => isKind(o, kind) && nameOf(o) === name);
    return index < 0 ? undefined : (this.options[index] ?? DEFAULT_CHILD_OPTIONS);
  }

  /**
   * Sets the parent's status (an object).
   * @param {object} status
   * @returns {this}
   */
  setStatus(status) {
    this.status = parseJson(canonicalJson(status));
    return this;
  }

  /**
   * Asks to be called again after `ms` milliseconds even if nothing changes.
   * @param {number} ms
   * @returns {this}
   */
  requeueAfter(ms) {
    this.requeueAfterMs = ms;
    return this;
  }

  /**
   * The desired child of `kind` named `name`, if there is one: handy in unit tests.
   * @param {import('./children.js').Kind} kind
   * @param {string} name
   */
  get(kind, name) {
    return this.children.find((o) => isKind(o, kind) && nameOf(o) === name);
  }
}
