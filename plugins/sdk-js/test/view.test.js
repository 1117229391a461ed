// The port of the Rust SDK's view.rs tests: kubectl's rollout rules, and the spec hash that says whether a workload is current.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Desired, Observed, childMeta, kinds } from '../src/children.js';
import { Retry } from '../src/errors.js';
import { SPEC_HASH_ANNOTATION, WorkloadView } from '../src/view.js';

const deployment = (replicas, status) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'd', generation: 2 },
  spec: { replicas },
  status,
});
const rollout = (object) => WorkloadView.decode(object).rollout();
const pendingReason = (object) => {
  const r = rollout(object);
  assert.ok(!r.isComplete, JSON.stringify(r));
  return r.reason;
};

test('a Deployment is complete when every replica is updated and available', () => {
  const done = deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2, readyReplicas: 2 });
  assert.equal(rollout(done).state, 'Complete');
  assert.equal(rollout(done).reason, 'RolloutComplete');
});

test('a Deployment whose spec is not observed is pending', () => {
  assert.equal(pendingReason(deployment(2, { observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2 })), 'SpecNotObserved');
  assert.equal(pendingReason(deployment(2, { replicas: 2, updatedReplicas: 2, availableReplicas: 2 })), 'SpecNotObserved');
});

test('a Deployment past its progress deadline has failed', () => {
  const stuck = deployment(2, {
    observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2,
    conditions: [{ type: 'Available', reason: 'MinimumReplicasAvailable' }, { type: 'Progressing', reason: 'ProgressDeadlineExceeded' }],
  });
  assert.equal(rollout(stuck).state, 'Failed');
  assert.equal(rollout(stuck).message, 'Deployment "d" exceeded its progress deadline');
});

test('a Deployment rolling out is pending, saying what it waits for', () => {
  const short = deployment(3, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
  assert.equal(rollout(short).message, '2 of 3 new replicas have been updated');
  const surge = deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 2, availableReplicas: 3 });
  assert.equal(rollout(surge).message, '1 old replicas are pending termination');
  const starting = deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1, readyReplicas: 2 });
  assert.equal(rollout(starting).message, '1 of 2 updated replicas are available');
  assert.equal(pendingReason(starting), 'RolloutInProgress');
});

const statefulSet = (strategy, status) => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 's', generation: 5 },
  spec: { replicas: 3, updateStrategy: strategy },
  status,
});
const rolling = (partition) => ({ type: 'RollingUpdate', rollingUpdate: { partition } });

test('a StatefulSet is complete when every pod is updated and ready', () => {
  const done = statefulSet(rolling(0), { observedGeneration: 5, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: 's-2', updateRevision: 's-2' });
  assert.ok(rollout(done).isComplete);
  assert.equal(pendingReason(statefulSet(rolling(0), { observedGeneration: 4, replicas: 3, readyReplicas: 3, updatedReplicas: 3 })), 'SpecNotObserved');
  const starting = statefulSet(rolling(0), { observedGeneration: 5, replicas: 3, readyReplicas: 2, updatedReplicas: 3 });
  assert.equal(rollout(starting).message, 'waiting for 1 pods to be ready');
});

test('a StatefulSet counts updated pods above its partition, or compares revisions', () => {
  const status = { observedGeneration: 5, replicas: 3, readyReplicas: 3, updatedReplicas: 2, currentRevision: 's-1', updateRevision: 's-2' };
  assert.equal(rollout(statefulSet(rolling(0), status)).message, '2 of 3 new pods have been updated');
  assert.ok(rollout(statefulSet(rolling(1), status)).isComplete);
  assert.equal(pendingReason(statefulSet({ type: 'RollingUpdate', rollingUpdate: {} }, { ...status, currentRevision: undefined, updateRevision: undefined })), 'RolloutInProgress');
  const revisions = (current) => ({ observedGeneration: 5, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: current, updateRevision: 's-2' });
  assert.equal(rollout(statefulSet({ type: 'RollingUpdate' }, revisions('s-1'))).message, 'waiting for the rolling update to revision s-2 (3 pods updated)');
  assert.ok(rollout(statefulSet({ type: 'RollingUpdate' }, revisions('s-2'))).isComplete);
  const onDelete = (updated) => statefulSet({ type: 'OnDelete' }, { observedGeneration: 5, replicas: 3, readyReplicas: 3, updatedReplicas: updated });
  assert.equal(pendingReason(onDelete(2)), 'RolloutInProgress');
  assert.ok(rollout(onDelete(3)).isComplete);
});

test('kinds without rollout rules are not complete', () => {
  const daemonSet = { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'x', generation: 1 }, status: { observedGeneration: 1 } };
  assert.equal(rollout(daemonSet).reason, 'UnsupportedKind');
  assert.equal(rollout(daemonSet).message, 'no rollout rules for kind "DaemonSet"');
});

function desiredDeployment(image) {
  return new Desired().child(kinds.Deployment, {
    metadata: childMeta('d'),
    spec: { replicas: 2, template: { spec: { containers: [{ name: 'c', image }] } } },
  });
}

/** What the API server holds after applying `desired`'s Deployment: defaulted, generation 2, rolled out. */
function applied(desired) {
  const object = structuredClone(desired.children[0]);
  object.spec.template.spec.containers[0].imagePullPolicy = 'IfNotPresent';
  object.metadata.generation = 2;
  object.status = { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 };
  return object;
}

test('workloads are stamped with the hash of their spec, as the Rust SDK stamps them, and nothing else is', () => {
  const a = desiredDeployment('memcached:1');
  const hash = (d) => d.children[0].metadata.annotations?.[SPEC_HASH_ANNOTATION];
  assert.equal(hash(a).length, 64);
  assert.equal(hash(a), hash(desiredDeployment('memcached:1')));
  assert.notEqual(hash(a), hash(desiredDeployment('memcached:2')));
  assert.equal(a.children[0].spec.template.metadata, undefined);
  const service = new Desired().child(kinds.Service, { metadata: childMeta('d') });
  assert.equal(service.children[0].metadata.annotations, undefined);
});

test('the rollout of a changed spec is pending until the workload carries it', () => {
  const old = desiredDeployment('memcached:1');
  const next = desiredDeployment('memcached:2');
  const view = new Observed([applied(old)]).view(kinds.Deployment, 'd', WorkloadView);
  assert.ok(view.rollout().isComplete);
  assert.ok(view.isCurrent(old));
  assert.ok(view.rolloutOf(old).isComplete);
  assert.ok(!view.isCurrent(next));
  assert.equal(view.rolloutOf(next).reason, 'SpecNotApplied');
  assert.equal(view.rolloutOf(next).message, 'the Deployment "d" does not carry the desired spec yet');
  const unstamped = applied(old);
  delete unstamped.metadata.annotations;
  assert.equal(new Observed([unstamped]).view(kinds.Deployment, 'd', WorkloadView).rolloutOf(old).reason, 'SpecNotApplied');
  const otherKind = { ...applied(old), kind: 'StatefulSet' };
  assert.ok(!new Observed([otherKind]).view(kinds.StatefulSet, 'd', WorkloadView).isCurrent(old));
});

test('views decode only the fields asked for, and a field of another type is a Retry', () => {
  const observed = new Observed([
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' }, status: { readyReplicas: 7 } },
    { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'a', generation: 4 },
      spec: { replicas: 3, template: { spec: { volumes: [{ name: 'v', emptyDir: {} }] } } },
      status: { readyReplicas: 2, observedGeneration: 4 } },
    { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'b' }, status: { readyReplicas: 'two' } },
  ]);
  const view = observed.view(kinds.Deployment, 'a', WorkloadView);
  assert.equal(view.metadata.generation, 4);
  assert.equal(view.spec.replicas, 3);
  assert.equal(view.status.readyReplicas, 2);
  assert.equal(view.status.updatedReplicas, undefined);
  assert.equal(observed.view(kinds.Deployment, 'c', WorkloadView), undefined);
  assert.equal(observed.view(kinds.Service, 'b', WorkloadView), undefined);
  assert.throws(() => observed.view(kinds.Deployment, 'b', WorkloadView), (e) => {
    assert.ok(e instanceof Retry);
    assert.equal(e.message, 'observed Deployment "b" does not decode: invalid type: string "two", expected i32');
    return true;
  });
});
