// Spec and content hashes, and views of observed workloads with `kubectl rollout status`'s rules (a port of the Rust SDK's view.rs).
//
// A plugin sees its children as they were *before* the host applies its answer, so after a
// spec change it observes the old workload, fully rolled out. The SDK therefore stamps every
// workload a plugin returns (a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job) with
// SPEC_HASH_ANNOTATION, a SHA-256 of its `spec` as the plugin wrote it (canonical JSON, the
// same text as the Rust SDK's): an observed workload whose annotation equals the hash desired
// now carries the desired spec, and `WorkloadView.rolloutOf(desired)` then applies kubectl's
// rules to it (for a Job: whether it has run to completion). Hashing the desired
// side only is immune to the API server's defaulting and covers every field; the annotation is
// on the workload, not its pod template, so it never rolls the pods.

import { canonicalJson, rustDebugString } from './json.js';
import { t } from './schema.js';
import { sha256Hex } from './sha256.js';
import { condition } from './status.js';

/** The annotation the SDK puts on every workload a plugin returns: the SHA-256 (hex) of its spec. */
export const SPEC_HASH_ANNOTATION = 'sdk.operator-host.dev/spec-hash';

/**
 * The annotation for a pod template that must change, and so roll the pods, when content they
 * read but do not embed changes (a ConfigMap's data): set it to `contentHash` of that content.
 */
export const CONTENT_HASH_ANNOTATION = 'sdk.operator-host.dev/content-hash';

/** The kinds whose children get SPEC_HASH_ANNOTATION (`apiVersion`, `kind`): those that roll pods out, and the Job, whose run is of one spec. */
const WORKLOAD_KINDS = [
  ['apps/v1', 'Deployment'],
  ['apps/v1', 'StatefulSet'],
  ['apps/v1', 'DaemonSet'],
  ['apps/v1', 'ReplicaSet'],
  ['batch/v1', 'Job'],
];

/**
 * A stable hash of `content`: SHA-256 (hex) of its canonical JSON (maps sorted by key), equal
 * to the Rust SDK's `content_hash` of the same value.
 * @param {any} content
 * @returns {string}
 */
export function contentHash(content) {
  return sha256Hex(canonicalJson(content));
}

/**
 * Marks `child` (a JSON object) with the hash of its `spec` when it is a workload (see
 * WORKLOAD_KINDS) with a spec.
 * @param {any} child
 */
export function stampSpecHash(child) {
  const isWorkload = WORKLOAD_KINDS.some(([apiVersion, kind]) => child.apiVersion === apiVersion && child.kind === kind);
  if (!isWorkload || !Object.hasOwn(child, 'spec')) return;
  const hash = contentHash(child.spec);
  if (child.metadata === undefined) child.metadata = {};
  const metadata = child.metadata;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return;
  if (metadata.annotations === undefined) metadata.annotations = {};
  const annotations = metadata.annotations;
  if (typeof annotations === 'object' && annotations !== null && !Array.isArray(annotations)) {
    annotations[SPEC_HASH_ANNOTATION] = hash;
  }
}

// The fields a WorkloadView decodes, typed as the Rust SDK's (`&str` is "a borrowed string"
// to serde, `Option<i32>` an optional i32); every struct defaults its missing fields.
const str = (options = {}) => t.string({ expecting: 'a borrowed string', ...options });
const i32 = () => t.optional(t.integer({ format: 'int32' }));
const i64 = () => t.optional(t.integer({ format: 'int64' }));

const WORKLOAD_VIEW = t.object(
  {
    apiVersion: str({ default: '' }),
    kind: str({ default: '' }),
    metadata: t.object(
      {
        name: str({ default: '' }),
        generation: i64(),
        annotations: t.object({ [SPEC_HASH_ANNOTATION]: t.optional(str()) }, { name: 'SpecHashView', default: {} }),
      },
      { name: 'MetadataView', default: { name: '', annotations: {} } },
    ),
    spec: t.object(
      {
        replicas: i32(),
        updateStrategy: t.object(
          {
            type: t.optional(str()),
            rollingUpdate: t.optional(t.object({ partition: i32() }, { name: 'RollingUpdateView' })),
          },
          { name: 'UpdateStrategyView', default: {} },
        ),
      },
      { name: 'WorkloadSpecView', default: { updateStrategy: {} } },
    ),
    status: t.object(
      {
        replicas: i32(),
        readyReplicas: i32(),
        updatedReplicas: i32(),
        availableReplicas: i32(),
        observedGeneration: i64(),
        currentRevision: t.optional(str()),
        updateRevision: t.optional(str()),
        desiredNumberScheduled: i32(),
        updatedNumberScheduled: i32(),
        numberAvailable: i32(),
        conditions: t.array(
          t.object(
            { type: str({ default: '' }), status: str({ default: '' }), reason: t.optional(str()) },
            { name: 'WorkloadConditionView', default: {} },
          ),
          { default: [] },
        ),
      },
      { name: 'WorkloadStatusView', default: { conditions: [] } },
    ),
  },
  { name: 'WorkloadView' },
);

// Defaults of nested structs are written as JSON above; fill in what their own defaults say.
function withDefaults(view) {
  view.metadata.annotations ??= {};
  view.metadata.name ??= '';
  view.spec.updateStrategy ??= {};
  view.status.conditions ??= [];
  for (const c of view.status.conditions) {
    c.type ??= '';
    c.status ??= '';
  }
  return view;
}

/** Where the rollout of a workload stands, by `kubectl rollout status`'s rules. */
export class Rollout {
  /**
   * @param {'Complete' | 'Pending' | 'Failed'} state
   * @param {string} reason CamelCase, e.g. `RolloutInProgress`
   * @param {string} message what is awaited, or why it failed
   */
  constructor(state, reason, message) {
    this.state = state;
    this.reason = reason;
    this.message = message;
  }
  static complete() {
    return new Rollout('Complete', 'RolloutComplete', 'rolled out');
  }
  static pending(reason, message) {
    return new Rollout('Pending', reason, message);
  }
  static failed(reason, message) {
    return new Rollout('Failed', reason, message);
  }
  /** Whether every pod runs the workload's current spec and is ready (available, for Deployments), or the Job has completed. */
  get isComplete() {
    return this.state === 'Complete';
  }

  /**
   * The condition `type` (`Available`, `MigrationComplete`, ...) of this rollout, of the
   * parent's `generation`: `True` when complete, with the rollout's reason and message.
   * @param {string} type
   * @param {number} [generation] the parent's `metadata.generation`
   * @returns {import('./status.js').Condition}
   */
  condition(type, generation) {
    return condition(type, this.isComplete, this.reason, this.message, generation);
  }
}

/**
 * An observed Deployment, StatefulSet, DaemonSet or Job, reduced to what a status needs:
 * replica counts, and whether the spec the plugin desires is rolled out (or, for a Job, has
 * run to completion). Get one with `observed.view(kinds.Deployment, name, WorkloadView)`, or
 * the rollout directly with `observed.rolloutOf(kinds.Job, name, desired)`.
 */
export class WorkloadView {
  /**
   * Decodes an observed workload as the Rust SDK's `WorkloadView` does (a `DecodeError` for a
   * field of the wrong type).
   * @param {any} object
   * @returns {WorkloadView}
   */
  static decode(object, source = undefined, path = []) {
    return new WorkloadView(withDefaults(WORKLOAD_VIEW.decode(object, source, path)));
  }

  /** @param {any} fields the decoded fields */
  constructor(fields) {
    /** @type {string} */
    this.apiVersion = fields.apiVersion;
    /** @type {string} */
    this.kind = fields.kind;
    /** @type {{name: string, generation?: number, annotations: Record<string, string>}} */
    this.metadata = fields.metadata;
    /** @type {{replicas?: number, updateStrategy: {type?: string, rollingUpdate?: {partition?: number}}}} */
    this.spec = fields.spec;
    /** @type {{replicas?: number, readyReplicas?: number, updatedReplicas?: number, availableReplicas?: number, observedGeneration?: number, currentRevision?: string, updateRevision?: string, desiredNumberScheduled?: number, updatedNumberScheduled?: number, numberAvailable?: number, conditions: {type: string, status: string, reason?: string}[]}} */
    this.status = fields.status;
  }

  /** The spec hash the SDK stamped on this workload when the plugin returned it, if any. */
  get specHash() {
    return this.metadata.annotations[SPEC_HASH_ANNOTATION];
  }

  /**
   * Whether this observed workload carries the spec `desired` holds for it (the child of the
   * same kind and name): false when the plugin just changed it, until the host applied it.
   * @param {import('./children.js').Desired} desired
   */
  isCurrent(desired) {
    const child = desired.children.find(
      (c) => c?.apiVersion === this.apiVersion && c?.kind === this.kind && c?.metadata?.name === this.metadata.name,
    );
    const wanted = child?.metadata?.annotations?.[SPEC_HASH_ANNOTATION];
    return typeof wanted === 'string' && wanted === this.specHash;
  }

  /**
   * The rollout of the spec `desired` holds for this workload: pending (`SpecNotApplied`) while
   * the observed workload carries another spec (an old Job's completion is not the desired
   * Job's), else `rollout()`. A status that says "ready" only when this is complete tells the
   * truth about the parent's generation.
   * @param {import('./children.js').Desired} desired
   * @returns {Rollout}
   */
  rolloutOf(desired) {
    if (this.isCurrent(desired)) return this.rollout();
    return Rollout.pending('SpecNotApplied', `the ${this.kindName()} does not carry the desired spec yet`);
  }

  /**
   * The rollout of this workload's own current spec, by `kubectl rollout status`'s rules for
   * its kind (Deployment, StatefulSet, DaemonSet), or for a Job its run: complete once its
   * `Complete` condition holds, failed once its `Failed` one does. It knows nothing of what
   * the plugin desires: see `rolloutOf`.
   * @returns {Rollout}
   */
  rollout() {
    switch (this.kind) {
      case 'Deployment':
        return this.deploymentRollout();
      case 'StatefulSet':
        return this.statefulSetRollout();
      case 'DaemonSet':
        return this.daemonSetRollout();
      case 'Job':
        return this.jobRun();
      default:
        return Rollout.failed('UnsupportedKind', `no rollout rules for kind ${rustDebugString(this.kind)}`);
    }
  }

  kindName() {
    return `${this.kind} ${rustDebugString(this.metadata.name)}`;
  }

  // Whether the controller has acted on the current spec.
  specObserved() {
    const observed = this.status.observedGeneration ?? 0;
    const generation = this.metadata.generation;
    return observed > 0 && generation !== undefined && generation <= observed;
  }

  notObserved() {
    return Rollout.pending('SpecNotObserved', `waiting for the ${this.kind} controller to observe its spec`);
  }

  // kubectl's DeploymentStatusViewer.
  deploymentRollout() {
    if (!this.specObserved()) return this.notObserved();
    const status = this.status;
    const progressing = status.conditions.find((c) => c.type === 'Progressing');
    if (progressing?.reason === 'ProgressDeadlineExceeded') {
      return Rollout.failed('ProgressDeadlineExceeded', `${this.kindName()} exceeded its progress deadline`);
    }
    const updated = status.updatedReplicas ?? 0;
    const total = status.replicas ?? 0;
    const available = status.availableReplicas ?? 0;
    const wanted = this.spec.replicas;
    if (wanted !== undefined && updated < wanted) {
      return Rollout.pending('RolloutInProgress', `${updated} of ${wanted} new replicas have been updated`);
    }
    if (total > updated) {
      return Rollout.pending('RolloutInProgress', `${total - updated} old replicas are pending termination`);
    }
    if (available < updated) {
      return Rollout.pending('RolloutInProgress', `${available} of ${updated} updated replicas are available`);
    }
    return Rollout.complete();
  }

  // kubectl's DaemonSetStatusViewer.
  daemonSetRollout() {
    if (!this.specObserved()) return this.notObserved();
    const status = this.status;
    const wanted = status.desiredNumberScheduled ?? 0;
    const updated = status.updatedNumberScheduled ?? 0;
    const available = status.numberAvailable ?? 0;
    if (updated < wanted) {
      return Rollout.pending('RolloutInProgress', `${updated} of ${wanted} new pods have been updated`);
    }
    if (available < wanted) {
      return Rollout.pending('RolloutInProgress', `${available} of ${wanted} updated pods are available`);
    }
    return Rollout.complete();
  }

  // A Job's run (a Job has no observed generation: its spec cannot change once created).
  jobRun() {
    const holds = (type) => this.status.conditions.find((c) => c.type === type && c.status === 'True');
    if (holds('Complete') !== undefined) return Rollout.complete();
    const failed = holds('Failed');
    if (failed !== undefined) {
      return Rollout.failed('JobFailed', `${this.kindName()} failed (${failed.reason ?? 'no reason given'})`);
    }
    return Rollout.pending('JobRunning', `waiting for ${this.kindName()} to complete`);
  }

  // kubectl's StatefulSetStatusViewer, a missing partition read as 0 (the API server's
  // default) and OnDelete (no kubectl rule) as an unpartitioned rolling update.
  statefulSetRollout() {
    if (!this.specObserved()) return this.notObserved();
    const status = this.status;
    const ready = status.readyReplicas ?? 0;
    const updated = status.updatedReplicas ?? 0;
    const wanted = this.spec.replicas;
    if (wanted !== undefined && ready < wanted) {
      return Rollout.pending('RolloutInProgress', `waiting for ${wanted - ready} pods to be ready`);
    }
    const strategy = this.spec.updateStrategy;
    let partition;
    if (strategy.type === 'OnDelete') partition = 0;
    else if (strategy.rollingUpdate !== undefined) partition = strategy.rollingUpdate.partition ?? 0;
    if (partition !== undefined) {
      if (wanted !== undefined && updated < wanted - partition) {
        return Rollout.pending('RolloutInProgress', `${updated} of ${wanted - partition} new pods have been updated`);
      }
      return Rollout.complete();
    }
    if (status.updateRevision !== status.currentRevision) {
      return Rollout.pending(
        'RolloutInProgress',
        `waiting for the rolling update to revision ${status.updateRevision ?? ''} (${updated} pods updated)`,
      );
    }
    return Rollout.complete();
  }
}
