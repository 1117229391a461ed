// Unit tests of the Memcached plugin's logic (the Rust plugin's tests.rs, ported), with no host.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { InvalidSpec, SPEC_HASH_ANNOTATION, kinds } from '@operator-host/sdk';
import { DEFAULT_IMAGE, DEFAULT_PORT, MAX_SIZE, Memcached, defaultParent, pinnedImage, plugin, validateParent } from '../src/memcached.js';

function memcached(name, size, spec = {}) {
  return {
    apiVersion: 'cache.example.com/v1alpha1',
    kind: 'Memcached',
    metadata: { name, generation: 3 },
    spec: { size, image: DEFAULT_IMAGE, containerPort: DEFAULT_PORT, ...spec },
  };
}

const reconcile = (cr, observed = []) => plugin.run(cr, observed);
const deploymentOf = (desired, name) => desired.get(kinds.Deployment, name);
const podTemplate = (desired, name) => deploymentOf(desired, name).spec.template;

/** The Deployment the host applied for `cr`, once its controller observed it: `ready` pods ready, all updated and available. */
function appliedDeployment(cr, ready) {
  const deployment = structuredClone(reconcile(cr).children[0]);
  assert.equal(deployment.kind, 'Deployment');
  deployment.metadata.generation = 2;
  deployment.status = { observedGeneration: 2, replicas: ready, readyReplicas: ready, updatedReplicas: ready, availableReplicas: ready };
  return deployment;
}

const observedDeployment = (size, ready) => [appliedDeployment(memcached('mc', size), ready)];

function available(desired) {
  const condition = desired.status.conditions[0];
  assert.equal(condition.type, 'Available');
  return [condition.status, condition.reason];
}

function invalid(cr) {
  try {
    reconcile(cr);
  } catch (e) {
    assert.ok(e instanceof InvalidSpec, String(e));
    return e.message;
  }
  assert.fail('accepted');
}

test('deployment replicas follow size and the service targets the port', () => {
  const desired = reconcile(memcached('mc', 3));
  assert.equal(desired.children.length, 2);
  assert.equal(deploymentOf(desired, 'mc').spec.replicas, 3);
  assert.equal(desired.get(kinds.Service, 'mc').spec.ports[0].port, DEFAULT_PORT);
});

test('selectors are unique per CR, and the service selects the deployment pods', () => {
  const a = reconcile(memcached('a', 1));
  const b = reconcile(memcached('b', 1));
  const selector = (d, n) => deploymentOf(d, n).spec.selector.matchLabels;
  assert.notDeepEqual(selector(a, 'a'), selector(b, 'b'));
  assert.deepEqual(a.get(kinds.Service, 'a').spec.selector, selector(a, 'a'));
});

test('image and port changes change the pod template', () => {
  const before = podTemplate(reconcile(memcached('mc', 1)), 'mc');
  assert.notDeepEqual(before, podTemplate(reconcile(memcached('mc', 1, { image: 'memcached:1.6.40' })), 'mc'));
  const template = podTemplate(reconcile(memcached('mc', 1, { containerPort: 11311 })), 'mc');
  assert.notDeepEqual(before, template);
  assert.equal(template.spec.containers[0].ports[0].containerPort, 11311);
  assert.deepEqual(template.spec.containers[0].args, ['-m=64', '-o', 'modern', '-p=11311']);
});

test('status without an observed deployment is not available', () => {
  const desired = reconcile(memcached('mc', 2));
  assert.equal(desired.status.readyReplicas, 0);
  assert.deepEqual(desired.status.conditions, [
    { type: 'Available', status: 'False', reason: 'DeploymentNotFound', message: 'the Deployment has not been observed yet', observedGeneration: 3 },
  ]);
});

test('status is available once every pod is ready', () => {
  const cr = memcached('mc', 2);
  assert.deepEqual(available(reconcile(cr, observedDeployment(2, 1))), ['False', 'RolloutInProgress']);
  const ready = reconcile(cr, observedDeployment(2, 2));
  assert.equal(ready.status.readyReplicas, 2);
  assert.deepEqual(available(ready), ['True', 'MinimumReplicasReady']);
  assert.equal(ready.status.conditions[0].message, '2 of 2 pods are ready');
  assert.equal(ready.status.selector, 'app.kubernetes.io/instance=mc,app.kubernetes.io/name=memcached');
});

test('status reports scaling while the deployment has the old size', () => {
  const desired = reconcile(memcached('mc', 5), observedDeployment(2, 2));
  assert.equal(desired.status.conditions[0].reason, 'Scaling');
  assert.equal(desired.status.conditions[0].message, 'the Deployment is being scaled to 5 replicas');
});

test('out-of-range values are rejected with the messages of the Rust plugin', () => {
  assert.equal(invalid(memcached('mc', MAX_SIZE + 1)), 'spec.size: must be between 0 and 100, got 101');
  assert.equal(invalid(memcached('mc', -1)), 'spec.size: must be between 0 and 100, got -1');
  assert.equal(invalid(memcached('mc', 1, { containerPort: 70000 })), 'spec.containerPort: must be between 1 and 65535, got 70000');
  assert.equal(invalid(memcached('mc', 1, { containerPort: 0 })), 'spec.containerPort: must be between 1 and 65535, got 0');
  // Size is checked first, as in the Rust plugin's validate.
  assert.equal(invalid(memcached('mc', 101, { containerPort: 0 })), 'spec.size: must be between 0 and 100, got 101');
  assert.equal(invalid(memcached('mc', 1, { image: 'bad image' })), 'spec.image: must be a container image reference, got "bad image"');
  assert.equal(invalid(memcached('mc', 1, { image: '' })), 'spec.image: must be a container image reference, got ""');
  assert.equal(invalid(memcached('mc', 1, { image: 'a\u00a0b' })), 'spec.image: must be a container image reference, got "a\\u{a0}b"');
  assert.equal(invalid(memcached('mc', '3')), 'the Memcached does not match its schema: spec.size: invalid type: string "3", expected i32');
});

test('the CRD declares defaults, ranges and printer columns', () => {
  const crd = JSON.parse(plugin.info().crd);
  const version = crd.spec.versions[0];
  const spec = version.schema.openAPIV3Schema.properties.spec.properties;
  assert.equal(spec.size.maximum, 100);
  assert.match(plugin.info().crd, /"maximum":100\.0,"minimum":0\.0/);
  assert.equal(spec.image.default, DEFAULT_IMAGE);
  assert.equal(spec.containerPort.default, DEFAULT_PORT);
  assert.deepEqual(version.additionalPrinterColumns.map((c) => c.name), ['Size', 'Ready', 'Available', 'Image', 'Age']);
  assert.deepEqual(version.subresources.status, {});
  assert.deepEqual(crd.spec.names.shortNames, ['mc']);
  assert.deepEqual(Memcached.gvk, { group: 'cache.example.com', version: 'v1alpha1', kind: 'Memcached', plural: 'memcacheds', namespaced: true });
});

test('children carry no namespace or owner', () => {
  for (const child of reconcile(memcached('mc', 1)).children) {
    assert.equal(child.metadata.namespace, undefined);
    assert.equal(child.metadata.ownerReferences, undefined);
  }
});

test('status is not available while the observed deployment has the old image', () => {
  const old = memcached('mc', 2);
  const next = memcached('mc', 2, { image: 'memcached:1.6.40' });
  next.metadata.generation = 4;
  const desired = reconcile(next, [appliedDeployment(old, 2)]);
  assert.deepEqual(available(desired), ['False', 'SpecNotApplied']);
  assert.equal(desired.status.conditions[0].observedGeneration, 4);
  assert.equal(desired.status.readyReplicas, 2);
  assert.deepEqual(available(reconcile(next, [appliedDeployment(next, 2)])), ['True', 'MinimumReplicasReady']);
});

test('status is not available until the new pods replace the old ones', () => {
  const cr = memcached('mc', 2);
  const rolling = appliedDeployment(cr, 2);
  rolling.metadata.generation = 3;
  assert.deepEqual(available(reconcile(cr, [rolling])), ['False', 'SpecNotObserved']);
  Object.assign(rolling.status, { observedGeneration: 3, replicas: 3, readyReplicas: 3 });
  const desired = reconcile(cr, [rolling]);
  assert.deepEqual(available(desired), ['False', 'RolloutInProgress']);
  assert.equal(desired.status.conditions[0].message, '3 of 2 pods are ready; rollout: 1 old replicas are pending termination');
  rolling.status.replicas = 2;
  assert.deepEqual(available(reconcile(cr, [rolling])), ['True', 'MinimumReplicasReady']);
});

test('the deployment carries the hash of its spec, equal to the Rust plugin’s, and its pods do not', () => {
  const desired = reconcile(memcached('mc', 1));
  const deployment = deploymentOf(desired, 'mc');
  assert.equal(deployment.metadata.annotations[SPEC_HASH_ANNOTATION].length, 64);
  assert.equal(deployment.spec.template.metadata.annotations, undefined);
  assert.equal(desired.get(kinds.Service, 'mc').metadata.annotations, undefined);
  // The shared fixture's Deployment is the Rust plugin's for examples/memcached.yaml: same hash.
  const fixture = readFileSync(new URL('../../../host/tests/fixtures/memcached/observed-rolled-out.yaml', import.meta.url), 'utf8');
  const rustHash = /sdk\.operator-host\.dev\/spec-hash: ([0-9a-f]{64})/.exec(fixture)[1];
  const example = {
    apiVersion: 'cache.example.com/v1alpha1',
    kind: 'Memcached',
    metadata: { name: 'memcached-sample', namespace: 'default' },
    spec: { size: 3, containerPort: 11211, resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } } },
  };
  assert.equal(deploymentOf(reconcile(example), 'memcached-sample').metadata.annotations[SPEC_HASH_ANNOTATION], rustHash);
});

const withResources = (resources) => memcached('mc', 2, { resources });

test('resources the API server refuses are rejected with the entry', () => {
  for (const [resources, field] of [
    [{ requests: { k: 1 } }, 'spec.resources.requests["k"]: '],
    [{ requests: { 'bad key': 1 } }, 'spec.resources.requests["bad key"]: '],
    [{ requests: { '-k-': 1 } }, 'spec.resources.requests["-k-"]: '],
    [{ limits: { cpu: 'not-a-quantity' } }, 'spec.resources.limits["cpu"]: '],
    [{ requests: { cpu: '2' }, limits: { cpu: '1' } }, 'spec.resources.requests["cpu"]: '],
    [{ requests: { 'example.com/gpu': 1 } }, 'spec.resources.limits["example.com/gpu"]: '],
  ]) {
    const message = invalid(withResources(resources));
    assert.ok(message.startsWith(field), `${JSON.stringify(resources)}: ${message}`);
  }
  assert.equal(invalid(withResources({ requests: { cpu: '2' }, limits: { cpu: '1' } })), 'spec.resources.requests["cpu"]: must be at most the limit of cpu (1), got 2');
});

test('the container gets resources as the API server stores them', () => {
  const container = (desired) => podTemplate(desired, 'mc').spec.containers[0];
  assert.deepEqual(container(reconcile(withResources({ requests: { cpu: '0.5' }, limits: {}, claims: [] }))).resources, { requests: { cpu: '500m' } });
  // Numbers are quantities too, written as Rust writes them.
  assert.deepEqual(container(reconcile(withResources({ requests: { cpu: 0.5, memory: 1024 } }))).resources, { requests: { cpu: '500m', memory: '1024' } });
  // Empty maps and lists are left out, not written for the API server to drop.
  assert.deepEqual(container(reconcile(withResources({ requests: {}, limits: {}, claims: [] }))).resources, {});
  assert.equal(container(reconcile(memcached('mc', 2))).resources, undefined);
});

test('the contract: info and a reconcile of the example as JSON text', () => {
  const info = plugin.info();
  assert.equal(info.name, 'memcached');
  assert.equal(info.version, JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
  assert.deepEqual(info.children.map((k) => k.kind), ['Deployment', 'Service']);
  const answer = plugin.reconcile({
    parent: JSON.stringify(memcached('mc', 1)),
    observed: [],
  });
  assert.equal(answer.children.length, 2);
  assert.deepEqual(answer.children.map(({ update, onPrune, readyWhen }) => [update, onPrune, readyWhen]), [
    ['in-place', 'delete', undefined],
    ['in-place', 'delete', undefined],
  ]);
  assert.equal(JSON.parse(answer.status).conditions[0].reason, 'DeploymentNotFound');
  assert.throws(() => plugin.reconcile({ parent: JSON.stringify(memcached('mc', 101)), observed: [] }), {
    tag: 'invalid-spec',
    val: 'spec.size: must be between 0 and 100, got 101',
  });
});

test('admission refuses what reconcile would and warns at size zero', () => {
  const tooBig = validateParent(Memcached.decodeExactly(memcached('mc', 101)));
  assert.deepEqual(tooBig.errors.map(String), ['spec.size: Invalid value: must be between 0 and 100, got 101']);
  assert.deepEqual(tooBig.warnings, []);
  const empty = validateParent(Memcached.decodeExactly(memcached('mc', 0)));
  assert.ok(empty.isValid);
  assert.deepEqual(empty.warnings, ['Memcached mc: spec.size is 0, so no Memcached pod runs']);
  assert.deepEqual(plugin.runValidate(memcached('mc', 3, { image: 'bad image' })).errors.map(String), [
    'spec.image: Invalid value: must be a container image reference, got "bad image"',
  ]);
});

test('defaulting pins an untagged memcached image and nothing else', () => {
  for (const [image, defaulted] of [
    ['memcached', 'memcached:1.6.39-alpine'],
    ['mirror.example.com/library/memcached', 'mirror.example.com/library/memcached:1.6.39-alpine'],
    ['memcached:1.6.30', 'memcached:1.6.30'],
    ['memcached@sha256:abc', 'memcached@sha256:abc'],
    ['example.com/other', 'example.com/other'],
  ]) {
    const cr = Memcached.decodeExactly(memcached('mc', 1, { image }));
    defaultParent(cr);
    assert.equal(cr.spec.image, defaulted);
    defaultParent(cr);
    assert.equal(cr.spec.image, defaulted, 'defaulting is idempotent');
  }
  assert.equal(pinnedImage('memcached:1.6.30'), undefined);
});

test('the contract: implements validate and default; default patches the image alone', () => {
  assert.deepEqual(plugin.info().implements, { validate: true, validateDelete: false, default: true, convert: false });
  const received = { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'mc', uid: 'u' }, spec: { size: 1, image: 'memcached', note: 'kept' } };
  assert.equal(
    plugin.default(JSON.stringify(received)),
    '{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"mc","uid":"u"},"spec":{"image":"memcached:1.6.39-alpine","note":"kept","size":1}}',
  );
  const pinned = JSON.stringify({ ...received, spec: { size: 1 } });
  assert.equal(plugin.default(pinned), pinned, 'the default image is not written in: the API server applies the schema default');
  assert.deepEqual(plugin.validate({ operation: 'create', object: JSON.stringify(memcached('mc', 0)), oldObject: undefined, user: 'u', dryRun: false }), {
    errors: [],
    warnings: ['Memcached mc: spec.size is 0, so no Memcached pod runs'],
  });
});
