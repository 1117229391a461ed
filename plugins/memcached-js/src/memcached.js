// operator-host plugin for Memcached in JavaScript: one Deployment and one Service per `Memcached` CR, as plugins/memcached does in Rust.

import {
  Desired,
  Validation,
  WorkloadView,
  childMeta,
  condition,
  defineKind,
  invalidField,
  kinds,
  nameAny,
  quote,
  reconciler,
  restrictedContainerSecurityContext,
  restrictedPodSecurityContext,
  t,
  validateContainerResources,
} from '@operator-host/sdk';

/** Largest `spec.size` accepted (the CRD schema says the same). */
export const MAX_SIZE = 100;
/** The image used when `spec.image` is not set. */
export const DEFAULT_IMAGE = 'memcached:1.6.39-alpine';
/** The port used when `spec.containerPort` is not set. */
export const DEFAULT_PORT = 11211;

const WHITE_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** The `Memcached` kind: its CRD, and the decoding and bounds of its spec, come from this. */
export const Memcached = defineKind({
  group: 'cache.example.com',
  version: 'v1alpha1',
  kind: 'Memcached',
  plural: 'memcacheds',
  shortNames: ['mc'],
  printerColumns: [
    { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
    { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
    { name: 'Available', type: 'string', jsonPath: '.status.conditions[?(@.type=="Available")].status' },
    { name: 'Image', type: 'string', priority: 1, jsonPath: '.spec.image' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
  spec: t.object(
    {
      size: t.integer({ format: 'int32', minimum: 0, maximum: MAX_SIZE, description: 'Number of Memcached pods.' }),
      image: t.string({ default: DEFAULT_IMAGE, description: 'Container image.' }),
      containerPort: t.integer({
        format: 'int32',
        minimum: 1,
        maximum: 65535,
        default: DEFAULT_PORT,
        description: "Port Memcached listens on, and the Service's port.",
      }),
      resources: t.optional(t.resources({ description: 'Compute resources of the Memcached container.' })),
    },
    { required: ['size'], description: 'The desired state of a Memcached cache.' },
  ),
  status: t.object(
    {
      readyReplicas: t.integer({ format: 'int32', default: 0, description: 'Pods of the Deployment that are ready.' }),
      selector: t.string({ default: '', description: 'The label selector of the pods, as a string.' }),
      conditions: t.conditions({
        default: [],
        description:
          '`Available`: whether the Deployment has rolled out the current spec (image, port,\nresources, size) and its `size` pods are ready.',
      }),
    },
    { description: 'The observed state of a Memcached cache.' },
  ),
});

/**
 * Checks what the schema cannot express (its bounds are checked by the SDK before this runs);
 * returns the spec the children are made from: `resources` as the API server stores them, so
 * the applied Deployment is the one observed.
 * @param {{size: number, image: string, containerPort: number, resources?: object}} spec
 */
export function validate(spec) {
  // The SDK already refused sizes and ports out of the schema's bounds, with these messages;
  // a spec built by hand (a unit test) gets the same.
  if (!(spec.size >= 0 && spec.size <= MAX_SIZE)) {
    throw invalidField('size', `must be between 0 and ${MAX_SIZE}, got ${spec.size}`);
  }
  if (!(spec.containerPort >= 1 && spec.containerPort <= 65535)) {
    throw invalidField('containerPort', `must be between 1 and 65535, got ${spec.containerPort}`);
  }
  // Empty, blank or with whitespace inside: Rust's `char::is_whitespace` (Unicode White_Space,
  // which JS's \s matches but for U+FEFF, not White_Space, and U+0085, missing from \s).
  if (spec.image === '' || WHITE_SPACE.test(spec.image)) {
    throw invalidField('image', `must be a container image reference, got ${quote(spec.image)}`);
  }
  const resources = spec.resources === undefined ? undefined : validateContainerResources('resources', spec.resources);
  return { ...spec, resources };
}

/**
 * Labels that select exactly one CR's pods: two CRs in a namespace never share them.
 * @param {string} name
 */
export function selectorLabels(name) {
  return { 'app.kubernetes.io/instance': name, 'app.kubernetes.io/name': 'memcached' };
}

function childLabels(selector) {
  return { ...selector, 'app.kubernetes.io/component': 'cache' };
}

function deployment(name, spec, selector) {
  const probe = { tcpSocket: { port: 'memcached' }, periodSeconds: 10 };
  const container = {
    name: 'memcached',
    image: spec.image,
    args: ['-m=64', '-o', 'modern', `-p=${spec.containerPort}`],
    ports: [{ name: 'memcached', containerPort: spec.containerPort, protocol: 'TCP' }],
    resources: spec.resources,
    readinessProbe: probe,
    livenessProbe: probe,
    securityContext: restrictedContainerSecurityContext(),
  };
  return {
    metadata: childMeta(name, childLabels(selector)),
    spec: {
      replicas: spec.size,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: childLabels(selector) },
        spec: {
          containers: [container],
          // The image runs as its own non-root user (memcache).
          securityContext: restrictedPodSecurityContext(),
        },
      },
    },
  };
}

function service(name, spec, selector) {
  return {
    metadata: childMeta(name, childLabels(selector)),
    spec: {
      selector,
      ports: [{ name: 'memcached', port: spec.containerPort, targetPort: 'memcached', protocol: 'TCP' }],
    },
  };
}

/**
 * Status from the observed Deployment: nothing is assumed that was not observed. `Available`
 * is true only once the Deployment carries the spec in `desired` (the one the host is about to
 * apply for this generation) and has rolled it out by `kubectl rollout status`'s rules.
 * @param {any} parent
 * @param {WorkloadView | undefined} observed
 * @param {Desired} desired
 * @param {Record<string, string>} selector
 */
function status(parent, observed, desired, selector) {
  const generation = parent.metadata.generation;
  const size = parent.spec.size;
  const ready = observed?.status.readyReplicas ?? 0;
  let available;
  if (observed === undefined) {
    available = condition('Available', false, 'DeploymentNotFound', 'the Deployment has not been observed yet', generation);
  } else if (observed.spec.replicas !== size) {
    available = condition('Available', false, 'Scaling', `the Deployment is being scaled to ${size} replicas`, generation);
  } else {
    const rollout = observed.rolloutOf(desired);
    const message = rollout.isComplete
      ? `${ready} of ${size} pods are ready`
      : `${ready} of ${size} pods are ready; rollout: ${rollout.message}`;
    const reason = rollout.isComplete ? 'MinimumReplicasReady' : rollout.reason;
    available = condition('Available', rollout.isComplete, reason, message, generation);
  }
  return {
    readyReplicas: ready,
    selector: Object.keys(selector)
      .sort()
      .map((k) => `${k}=${selector[k]}`)
      .join(','),
    conditions: [available],
  };
}

/**
 * The desired children and status of one `Memcached`.
 * @param {any} parent the decoded parent
 * @param {import('@operator-host/sdk').Observed} observed
 */
export function reconcile(parent, observed) {
  const spec = validate(parent.spec);
  const name = nameAny(parent);
  const labels = selectorLabels(name);
  const desired = new Desired();
  desired.child(kinds.Deployment, deployment(name, spec, labels));
  desired.child(kinds.Service, service(name, spec, labels));
  const observedDeployment = observed.view(kinds.Deployment, name, WorkloadView);
  desired.setStatus(status(parent, observedDeployment, desired, labels));
  return desired;
}

/**
 * Admission: refuses at `kubectl apply` what `reconcile` would report as an invalid spec, and
 * warns of a cache with no pod.
 * @param {any} parent the decoded parent
 */
export function validateParent(parent) {
  const validation = new Validation().check(() => validate(parent.spec));
  if (parent.spec.size === 0) {
    validation.warn(`Memcached ${nameAny(parent)}: spec.size is 0, so no Memcached pod runs`);
  }
  return validation;
}

/**
 * `image` with `DEFAULT_IMAGE`'s tag when it names the `memcached` repository without a tag or
 * digest (`memcached`, `mirror.example.com/library/memcached`); undefined otherwise.
 * @param {string} image
 */
export function pinnedImage(image) {
  const last = image.slice(image.lastIndexOf('/') + 1);
  const tag = DEFAULT_IMAGE.slice(DEFAULT_IMAGE.indexOf(':') + 1);
  return last === 'memcached' && !image.includes('@') ? `${image}:${tag}` : undefined;
}

/**
 * Admission: an image given without a tag or digest gets the tag this plugin is tested with,
 * so a cache never runs whatever `latest` is that day.
 * @param {any} parent the decoded parent, changed in place
 */
export function defaultParent(parent) {
  const pinned = pinnedImage(parent.spec.image);
  if (pinned !== undefined) parent.spec.image = pinned;
}

/** The component's export: the contract's functions; the host calls `validate` and `default`. */
export const plugin = reconciler({
  name: 'memcached',
  version: '0.1.0',
  parent: Memcached,
  children: [kinds.Deployment, kinds.Service],
  reconcile,
  validate: validateParent,
  default: defaultParent,
});
