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
  decode(object: unknown): Parent<Spec, Status>;
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
  constructor(objects?: any[]);
  static fromJson(texts: string[]): Observed;
  readonly objects: any[];
  readonly length: number;
  get(kind: Kind, name: string): any | undefined;
  view<T>(kind: Kind, name: string, type: { decode(object: unknown): T }): T | undefined;
  all(kind: Kind): any[];
}

export class Desired {
  children: any[];
  status: object;
  requeueAfterMs: number | undefined;
  child(kind: Kind, object: { metadata: object; [field: string]: unknown }): this;
  child(object: { apiVersion: string; kind: string; metadata: object; [field: string]: unknown }): this;
  setStatus(status: object): this;
  requeueAfter(ms: number): this;
  get(kind: Kind, name: string): any | undefined;
}

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
    conditions: { type: string; reason?: string }[];
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

/** What a plugin module exports as `plugin`. */
export interface Plugin<Spec, Status> {
  readonly name: string;
  readonly version: string;
  readonly parent: ParentKind<Spec, Status>;
  readonly children: Kind[];
  /** Decode and reconcile plain objects, as a call does: for unit tests. */
  run(parent: object, observed?: object[]): Desired;
  info(): object;
  reconcile(request: { parent: string; observed: string[] }): object;
  finalize(request: { parent: string; observed: string[] }): object;
}

export function reconciler<Spec, Status>(definition: {
  name: string;
  version: string;
  parent: ParentKind<Spec, Status>;
  children: Kind[];
  reconcile(parent: Parent<Spec, Status>, observed: Observed): Desired;
  finalize?(parent: Parent<Spec, Status>, observed: Observed): { done: boolean; requeueAfterMs?: number };
}): Plugin<Spec, Status>;
