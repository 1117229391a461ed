// Types of @operator-host/sdk for TypeScript authors (the SDK itself is plain JavaScript with JSDoc).

/** A Kubernetes kind a plugin reconciles or creates. */
export interface Kind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
}

export function kindOf(group: string, version: string, kind: string, plural: string, namespaced?: boolean): Kind;
export function apiVersionOf(kind: Kind): string;
export const kinds: Readonly<Record<
  | 'ConfigMap' | 'PersistentVolumeClaim' | 'Pod' | 'Secret' | 'Service' | 'ServiceAccount'
  | 'DaemonSet' | 'Deployment' | 'ReplicaSet' | 'StatefulSet' | 'HorizontalPodAutoscaler'
  | 'CronJob' | 'Job' | 'Ingress' | 'NetworkPolicy' | 'PodDisruptionBudget' | 'Role' | 'RoleBinding',
  Kind
>>;

/** A child's metadata: its name and labels only (the host adds namespace, owner and its labels). */
export function childMeta(name: string, labels?: Record<string, string>): { name: string; labels?: Record<string, string> };
/** The object's name, or its `generateName` while it has none (at admission); `''` without either (kube's `name_any`). */
export function nameAny(object: { metadata?: { name?: string; generateName?: string } }): string;
/** `app.kubernetes.io/name` and `app.kubernetes.io/instance` (the parent's name): a selector of a parent with one kind of pod. */
export function appLabels(app: string, instance: string): Record<string, string>;
/** `appLabels` and `app.kubernetes.io/component`: a selector of that component's pods only. */
export function componentLabels(app: string, instance: string, component: string): Record<string, string>;

/** The schema of a field: its OpenAPI schema, decoding (serde's rules) and bounds. */
export class Type<T = unknown> {
  readonly description?: string;
  readonly expecting: string;
  schema(): object;
  decode(value: unknown, source: string | undefined, path: (string | number)[]): T;
  check(value: T, path: string): [string, string] | undefined;
  /** Type-only: the decoded value's type. */
  readonly __type?: T;
}

export type Infer<S> = S extends Type<infer T> ? T : never;

type Common<D> = { description?: string; default?: D; expecting?: string };
type Props = Record<string, Type<any>>;
type Optional<P extends Props> = { [K in keyof P]: P[K] extends Type<infer T> ? (undefined extends T ? K : never) : never }[keyof P];
type ObjectOf<P extends Props> = { [K in Exclude<keyof P, Optional<P>>]: Infer<P[K]> } & { [K in Optional<P>]?: Infer<P[K]> };

export interface ResourceRequirements {
  claims?: { name?: string; request?: string }[];
  limits?: Record<string, string>;
  requests?: Record<string, string>;
}

export const t: {
  integer(options?: Common<number> & { format?: 'int32' | 'int64'; minimum?: number; maximum?: number }): Type<number>;
  number(options?: Common<number> & { format?: 'double' | 'float'; minimum?: number; maximum?: number }): Type<number>;
  string(options?: Common<string> & { format?: string; minLength?: number; maxLength?: number; pattern?: string; enum?: string[] }): Type<string>;
  boolean(options?: Common<boolean>): Type<boolean>;
  array<T>(items: Type<T>, options?: Common<T[]> & { minItems?: number; maxItems?: number; extensions?: object }): Type<T[]>;
  map<T>(values: Type<T>, options?: Common<Record<string, T>>): Type<Record<string, T>>;
  object<P extends Props>(properties: P, options?: Common<object> & { required?: (keyof P & string)[]; name?: string }): Type<ObjectOf<P>>;
  optional<T>(type: Type<T>): Type<T | undefined>;
  ref<T = unknown>(schema: object, options?: Common<T> & { decode?: (value: unknown, source: string | undefined, path: (string | number)[]) => T }): Type<T>;
  resources(options?: { description?: string }): Type<ResourceRequirements>;
  conditions(options?: { description?: string; default?: Condition[] }): Type<Condition[]>;
};

export class DecodeError extends Error {
  readonly path: (string | number)[];
  readonly problem: string;
}
export const CONDITIONS_SCHEMA: object;

export interface PrinterColumn {
  name: string;
  type: 'integer' | 'number' | 'string' | 'boolean' | 'date';
  jsonPath: string;
  priority?: number;
  description?: string;
  format?: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number | bigint;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/** A decoded parent: its spec with defaults filled in, its previous status if it decodes. */
export interface Parent<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}

export class ParentKind<Spec = unknown, Status = unknown> {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
  readonly apiVersion: string;
  readonly gvk: Kind;
  crd(): object;
  /** Decoded, bounds checked, a status that does not decode dropped: what reconcile gets. */
  decode(object: unknown): Parent<Spec, Status>;
  /** Decoded without the bounds and status leniency: what validate and default get; throws a `DecodeError`. */
  decodeExactly(object: unknown): Parent<Spec, Status>;
}

export function defineKind<Spec, Status = never>(declaration: {
  group: string;
  version: string;
  kind: string;
  plural: string;
  singular?: string;
  shortNames?: string[];
  categories?: string[];
  namespaced?: boolean;
  printerColumns?: PrinterColumn[];
  description?: string;
  spec: Type<Spec>;
  status?: Type<Status>;
}): ParentKind<Spec, Status>;

export class Observed {
  constructor(objects?: any[], related?: Record<string, any[]>);
  static fromJson(texts: string[], related?: { name: string; objects: string[] }[]): Observed;
  readonly objects: any[];
  readonly length: number;
  get(kind: Kind, name: string): any | undefined;
  view<T>(kind: Kind, name: string, type: { decode(object: unknown): T }): T | undefined;
  /** The rollout (a Job: the run) of the spec `desired` holds for this workload; `NotCreated` while there is none. */
  rolloutOf(kind: Kind, name: string, desired: Desired): Rollout;
  all(kind: Kind): any[];
  /** The related objects declared as `name` (JSON); empty when none matches or `name` was not declared. */
  related(name: string): any[];
  /** The same, each decoded by `type`; one that does not decode is a `Retry`. */
  related<T>(name: string, type: { decode(object: unknown): T }): T[];
  /** Sets the related objects declared as `name` (for tests). */
  withRelated(name: string, objects: any[]): this;
}

type ChildObject = { metadata: object; [field: string]: unknown };
type ChildWithKind = { apiVersion: string; kind: string; metadata: object; [field: string]: unknown };

export class Desired {
  children: any[];
  /** How the host handles each child, by index in `children`. */
  options: ChildOptions[];
  status: object;
  requeueAfterMs: number | undefined;
  child(kind: Kind, object: ChildObject): this;
  child(object: ChildWithKind): this;
  /** A child the host applies, prunes or waits for as `options` say. */
  childWith(kind: Kind, object: ChildObject, options: ChildOptions): this;
  childWith(object: ChildWithKind, options: ChildOptions): this;
  /** A Job run once per distinct `inputs`, recreated when they change; the children after it wait for its `Complete`; `observed.rolloutOf(kinds.Job, name, desired)` says whether this run completed. */
  runOnce(job: ChildObject, inputs: unknown): this;
  optionsOf(kind: Kind, name: string): ChildOptions | undefined;
  setStatus(status: object): this;
  requeueAfter(ms: number): this;
  get(kind: Kind, name: string): any | undefined;
}

export type UpdateStrategy = 'in-place' | 'recreate' | 'create-only';
export type DeletePolicy = 'delete' | 'orphan';
/** A barrier: a condition type with status `True`, or a field (dotted path) equal to a value (JSON text). */
export type Readiness = { readonly condition: string } | { readonly path: string; readonly value: string };

/** How the host handles one child. Immutable: each builder returns new options. */
export class ChildOptions {
  constructor(options?: { update?: UpdateStrategy; onPrune?: DeletePolicy; readyWhen?: Readiness });
  readonly update: UpdateStrategy;
  readonly onPrune: DeletePolicy;
  readonly readyWhen: Readiness | undefined;
  recreate(): ChildOptions;
  createOnly(): ChildOptions;
  orphanOnPrune(): ChildOptions;
  readyWhenCondition(conditionType: string): ChildOptions;
  readyWhenField(path: string, value: unknown): ChildOptions;
}

export type SecretView = 'data-hash' | 'full';

/** Another kind of object the plugin reads: the host watches it and passes it with each call. */
export class Related {
  constructor(name: string, kind: Kind, selector: { nameFromPath: string } | { labelSelector: string }, secretView?: SecretView);
  readonly name: string;
  readonly kind: Kind;
  readonly selector: { readonly nameFromPath: string } | { readonly labelSelector: string };
  readonly secretView: SecretView;
  /** The object named by the string at `path` of the parent (`spec.tls.secretName`). */
  static byNameAt(name: string, kind: Kind, path: string): Related;
  /** Every object matching the label selector (`app=web`). */
  static byLabels(name: string, kind: Kind, selector: string): Related;
  /** For a Secret: its data in clear (the policy must allow it); by default a hash of each value. */
  withSecretData(): Related;
}

export type FieldErrorType = 'required' | 'invalid' | 'forbidden' | 'not-supported' | 'duplicate' | 'too-long' | 'too-many' | 'not-found';
export const FIELD_ERROR_TYPES: readonly FieldErrorType[];

/** One refused field; `String(error)` prints it as the API server does. */
export class FieldError {
  constructor(error: { reason: FieldErrorType; field: string; value?: unknown; detail?: string });
  readonly reason: FieldErrorType;
  readonly field: string;
  readonly value: unknown;
  readonly detail: string;
}

/** What `validate` answers: refused when it holds an error; warnings shown either way. */
export class Validation {
  readonly errors: FieldError[];
  readonly warnings: string[];
  readonly isValid: boolean;
  error(error: FieldError | { reason: FieldErrorType; field: string; value?: unknown; detail?: string }): this;
  invalid(field: string, value: unknown, detail: string): this;
  required(field: string, detail: string): this;
  forbidden(field: string, detail: string): this;
  notSupported(field: string, value: unknown, supported: string[]): this;
  immutable(field: string, value: unknown): this;
  /** The field error of the `InvalidSpec` a reconcile check throws (`invalidField`, `invalidAt`). */
  check(checkOrError: (() => unknown) | InvalidSpec | Retry): this;
  warn(message: string): this;
  /** Throws the errors as one `InvalidSpec`, for a reconcile that checks what validate checks. */
  throwIfInvalid(): void;
}

/** One CRD serving the versions of `crds` (one version each), `storageVersion` stored: kube's `merge_crds`. */
export function mergeCrds(crds: object[], storageVersion: string): object;

export class InvalidSpec extends Error {}
export class Retry extends Error {}
export function invalidField(field: string, expected: string): InvalidSpec;
export function invalidAt(path: string, expected: string): InvalidSpec;

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number | bigint;
  lastTransitionTime?: string;
}
export function condition(type: string, ok: boolean, reason: string, message: string, observedGeneration?: number | bigint): Condition;
export function readyFromPhase(phase: string, ready: boolean, message: string, observedGeneration?: number | bigint): Condition;
export function camelCaseReason(text: string): string;

export function restrictedPodSecurityContext(user?: number): object;
export function restrictedContainerSecurityContext(): object;

export function validateContainerResources(field: string, resources: ResourceRequirements): { limits?: Record<string, string>; requests?: Record<string, string> };
export function canonicalQuantity(quantity: string): string;

export const SPEC_HASH_ANNOTATION: 'sdk.operator-host.dev/spec-hash';
export const CONTENT_HASH_ANNOTATION: 'sdk.operator-host.dev/content-hash';
export function contentHash(content: unknown): string;

export class Rollout {
  readonly state: 'Complete' | 'Pending' | 'Failed';
  readonly reason: string;
  readonly message: string;
  readonly isComplete: boolean;
  /** The condition `type` of this rollout, of the parent's `generation`: `True` when complete, with its reason and message. */
  condition(type: string, generation?: number | bigint): Condition;
}

export class WorkloadView {
  static decode(object: unknown): WorkloadView;
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { name: string; generation?: number; annotations: Record<string, string> };
  readonly spec: { replicas?: number; updateStrategy: { type?: string; rollingUpdate?: { partition?: number } } };
  readonly status: {
    replicas?: number; readyReplicas?: number; updatedReplicas?: number; availableReplicas?: number;
    observedGeneration?: number; currentRevision?: string; updateRevision?: string;
    desiredNumberScheduled?: number; updatedNumberScheduled?: number; numberAvailable?: number;
    conditions: { type: string; status: string; reason?: string }[];
  };
  readonly specHash: string | undefined;
  isCurrent(desired: Desired): boolean;
  rolloutOf(desired: Desired): Rollout;
  rollout(): Rollout;
}

export function sha256Hex(data: string | Uint8Array): string;
export function canonicalJson(value: unknown): string;
export function parseJson(text: string): any;
export class JsonFloat {
  constructor(value: number);
  readonly value: number;
}
/** A string quoted as the Rust SDK's messages quote it (Rust's `{:?}`). */
export function quote(text: string): string;

export namespace log {
  function trace(message: string): void;
  function debug(message: string): void;
  function info(message: string): void;
  function warn(message: string): void;
  function error(message: string): void;
  function setHostLog(log: (level: string, message: string) => void): void;
}

/** The contract's request of `reconcile` and `finalize`. */
export interface ReconcileRequest {
  parent: string;
  observed: string[];
  related?: { name: string; objects: string[] }[];
}

/** The contract's request of `validate`. */
export interface AdmissionRequest {
  operation: 'create' | 'update' | 'delete';
  object?: string;
  oldObject?: string;
  user: string;
  dryRun: boolean;
}

/** What a plugin module exports as `plugin`. */
export interface Plugin<Spec, Status> {
  readonly name: string;
  readonly version: string;
  readonly parent: ParentKind<Spec, Status>;
  readonly children: Kind[];
  readonly related: Related[];
  /** Decode and reconcile plain objects, as a call does: for unit tests. Related objects by name. */
  run(parent: object, observed?: object[], related?: Record<string, object[]>): Desired;
  /** Validate a create (`old` undefined) or an update of plain objects, as a call does. */
  runValidate(object: object, old?: object): Validation;
  runValidateDelete(old: object): Validation;
  /** A plain object defaulted, as a call does. */
  runDefault(object: object): any;
  /** A plain object converted, as a call does; throws the `InvalidSpec` or `Retry` that refuses it. */
  runConvert(object: object, toVersion: string): any;
  info(): object;
  reconcile(request: ReconcileRequest): object;
  finalize(request: ReconcileRequest): object;
  validate(request: AdmissionRequest): object;
  /** The object (JSON) defaulted; throws the refusal's message (a string). */
  default(object: string): string;
  /** The object (JSON) converted; throws the refusal's message (a string). */
  convert(object: string, toVersion: string): string;
}

export function reconciler<Spec, Status>(definition: {
  name: string;
  version: string;
  /** The kind in the version `reconcile`, `validate` and `default` decode. */
  parent: ParentKind<Spec, Status>;
  children: Kind[];
  related?: Related[];
  /** The CRD when it is not `parent.crd()`: several versions (`mergeCrds`) need `convert`. */
  crd?: object;
  reconcile(parent: Parent<Spec, Status>, observed: Observed): Desired;
  finalize?(parent: Parent<Spec, Status>, observed: Observed): { done: boolean; requeueAfterMs?: number };
  /** Given: the host calls it for creates (`old` undefined) and updates. */
  validate?(parent: Parent<Spec, Status>, old: Parent<Spec, Status> | undefined): Validation;
  /** Given: the host calls it for deletes. */
  validateDelete?(old: Parent<Spec, Status>): Validation;
  /** Given: the host calls it before validate; change `parent` or return it changed. */
  default?(parent: Parent<Spec, Status>): Parent<Spec, Status> | void;
  /** Given: the CRD's conversion webhook; `object` of any served version. */
  convert?(object: any, toVersion: string): any;
}): Plugin<Spec, Status>;
