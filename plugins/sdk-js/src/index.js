// @operator-host/sdk: write operator-host reconciler plugins in JavaScript (the Rust SDK's counterpart).

export { reconciler, defineKind, mergeCrds, ParentKind } from './plugin.js';
export { ChildOptions, Related } from './options.js';
export { Validation, FieldError, FIELD_ERROR_TYPES } from './admission.js';
export { t, Type, DecodeError, CONDITIONS_SCHEMA } from './schema.js';
export { kinds, kindOf, apiVersionOf, childMeta, nameAny, Observed, Desired } from './children.js';
export { appLabels, componentLabels } from './labels.js';
export { InvalidSpec, Retry, invalidField, invalidAt } from './errors.js';
export { condition, readyFromPhase, camelCaseReason } from './status.js';
export { restrictedPodSecurityContext, restrictedContainerSecurityContext } from './security.js';
export { validateContainerResources, canonicalQuantity } from './resources.js';
export {
  SPEC_HASH_ANNOTATION,
  CONTENT_HASH_ANNOTATION,
  contentHash,
  WorkloadView,
  Rollout,
} from './view.js';
export { sha256Hex } from './sha256.js';
export { canonicalJson, parseJson, JsonFloat, rustDebugString as quote } from './json.js';
export * as log from './log.js';
