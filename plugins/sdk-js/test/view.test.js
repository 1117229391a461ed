// The port of the Rust SDK's view.rs tests: kubectl's rollout rules, and the spec hash that says whether a workload is current.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Desired, Observed, childMeta, kinds } from '../src/children.js';
import { Retry } from '../src/errors.js';
import { canonicalJson } from '../src/json.js';
import { CONTENT_HASH_ANNOTATION, Rollout, SPEC_HASH_ANNOTATION, WorkloadView } from '../src/view.js';

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

test('a DaemonSet is complete when every node runs an available updated pod', () => {
  const daemonSet = (status) => ({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'agent', generation: 3 }, spec: {}, status });
  const done = daemonSet({ observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2 });
  assert.deepEqual(rollout(done), Rollout.complete());
  const updating = daemonSet({ observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 1, numberAvailable: 2 });
  assert.equal(pendingReason(updating), 'RolloutInProgress');
  assert.equal(rollout(updating).message, '1 of 2 new pods have been updated');
  const unavailable = daemonSet({ observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 1 });
  assert.equal(pendingReason(unavailable), 'RolloutInProgress');
  assert.equal(rollout(unavailable).message, '1 of 2 updated pods are available');
  const unobserved = daemonSet({ observedGeneration: 2, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2 });
  assert.equal(pendingReason(unobserved), 'SpecNotObserved');
  assert.equal(rollout(unobserved).message, 'waiting for the DaemonSet controller to observe its spec');
});

test('a Job is complete once its Complete condition holds and failed once Failed does', () => {
  const job = (conditions) => ({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'migrate' }, spec: {}, status: { conditions } });
  assert.equal(pendingReason(job([])), 'JobRunning');
  assert.equal(rollout(job([])).message, 'waiting for Job "migrate" to complete');
  // No status at all: running too (a Job has no observed generation to wait for).
  assert.equal(pendingReason({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'migrate' } }), 'JobRunning');
  assert.deepEqual(rollout(job([{ type: 'Complete', status: 'True' }])), Rollout.complete());
  assert.equal(pendingReason(job([{ type: 'Complete', status: 'False' }])), 'JobRunning');
  assert.equal(pendingReason(job([{ type: 'Complete' }])), 'JobRunning');
  const failed = rollout(job([{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }]));
  assert.equal(failed.state, 'Failed');
  assert.equal(failed.reason, 'JobFailed');
  assert.equal(failed.message, 'Job "migrate" failed (BackoffLimitExceeded)');
  assert.equal(rollout(job([{ type: 'Failed', status: 'True' }])).message, 'Job "migrate" failed (no reason given)');
  // Complete wins over Failed, as in the Rust SDK.
  assert.ok(rollout(job([{ type: 'Failed', status: 'True' }, { type: 'Complete', status: 'True' }])).isComplete);
});

const migration = (command) => ({
  metadata: childMeta('migrate'),
  spec: { template: { metadata: { name: 'migrate', labels: { run: command } } } },
});

test("an old Job's completion is not the desired Job's", () => {
  const old = new Desired().child(kinds.Job, migration('v1'));
  const observed = { ...structuredClone(old.children[0]), status: { conditions: [{ type: 'Complete', status: 'True' }] } };
  const view = WorkloadView.decode(observed);
  assert.deepEqual(view.rolloutOf(old), Rollout.complete());
  // The plugin now wants the Job of new inputs: the old one's completion says nothing.
  const next = new Desired().child(kinds.Job, migration('v2'));
  assert.equal(view.rolloutOf(next).reason, 'SpecNotApplied');
  assert.equal(view.rolloutOf(next).message, 'the Job "migrate" does not carry the desired spec yet');
});

test('the Job of runOnce is complete once it has run with these inputs', () => {
  const job = { metadata: childMeta('migrate'), spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'app:2' }] } } } };
  const desired = new Desired().runOnce(job, { image: 'app:2', schema: 7 });
  assert.equal(desired.children[0].metadata.annotations[SPEC_HASH_ANNOTATION].length, 64);
  const observed = (conditions) => new Observed([{ ...structuredClone(desired.children[0]), status: { conditions } }]);
  assert.equal(observed([]).rolloutOf(kinds.Job, 'migrate', desired).reason, 'JobRunning');
  assert.ok(observed([{ type: 'Complete', status: 'True' }]).rolloutOf(kinds.Job, 'migrate', desired).isComplete);
  assert.equal(observed([{ type: 'Failed', status: 'True', reason: 'DeadlineExceeded' }]).rolloutOf(kinds.Job, 'migrate', desired).reason, 'JobFailed');
  // New inputs: the completed run was of the old ones.
  const next = new Desired().runOnce(job, { image: 'app:3', schema: 7 });
  assert.equal(observed([{ type: 'Complete', status: 'True' }]).rolloutOf(kinds.Job, 'migrate', next).reason, 'SpecNotApplied');
  // None observed yet.
  const none = new Observed([]).rolloutOf(kinds.Job, 'migrate', desired);
  assert.equal(none.reason, 'NotCreated');
  assert.equal(none.message, 'the Job "migrate" is not created yet');
  assert.ok(!none.isComplete);
});

test('a rollout is a condition of the parent generation: True only when complete', () => {
  assert.deepEqual(Rollout.complete().condition('Available', 4), { type: 'Available', status: 'True', reason: 'RolloutComplete', message: 'rolled out', observedGeneration: 4 });
  const failed = Rollout.failed('JobFailed', 'Job "migrate" failed (BackoffLimitExceeded)');
  // As the Rust SDK serializes it (no observedGeneration when there is none).
  assert.equal(canonicalJson(failed.condition('MigrationComplete')), '{"message":"Job \\"migrate\\" failed (BackoffLimitExceeded)","reason":"JobFailed","status":"False","type":"MigrationComplete"}');
  const pending = Rollout.pending('NotCreated', 'the Job "m" is not created yet').condition('MigrationComplete', 2);
  assert.deepEqual([pending.status, pending.reason, pending.message, pending.observedGeneration], ['False', 'NotCreated', 'the Job "m" is not created yet', 2]);
});

test('kinds without rollout rules are not complete', () => {
  const replicaSet = { apiVersion: 'apps/v1', kind: 'ReplicaSet', metadata: { name: 'x', generation: 1 }, status: { observedGeneration: 1 } };
  assert.equal(rollout(replicaSet).reason, 'UnsupportedKind');
  assert.equal(rollout(replicaSet).state, 'Failed');
  assert.equal(rollout(replicaSet).message, 'no rollout rules for kind "ReplicaSet"');
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
  // Every workload kind, the Job included; a kind of another API version is not one.
  for (const kind of [kinds.StatefulSet, kinds.DaemonSet, kinds.ReplicaSet, kinds.Job]) {
    assert.equal(new Desired().child(kind, { metadata: childMeta('w'), spec: {} }).children[0].metadata.annotations[SPEC_HASH_ANNOTATION].length, 64, kind.kind);
  }
  const notAJob = new Desired().child({ apiVersion: 'apps/v1', kind: 'Job', metadata: childMeta('j'), spec: {} });
  assert.equal(notAJob.children[0].metadata.annotations, undefined);
  const cronJob = new Desired().child(kinds.CronJob, { metadata: childMeta('c'), spec: {} });
  assert.equal(cronJob.children[0].metadata.annotations, undefined);
});

// The Rust SDK's children for the same objects, as `Desired::child` and `Desired::run_once`
// return them (computed with the SDK crate: serde_json's text of each child, a k8s-openapi
// DaemonSet, ReplicaSet and Job decoded from these objects). Equal texts, so equal spec hashes.
const POD = { metadata: { labels: { app: 'x', é: 'ü' } }, spec: { containers: [{ name: 'c', image: 'agent:1', args: ['-v', '\u2028<&>'], resources: { limits: { cpu: '500m' } } }] } };
const JOB = { metadata: childMeta('migrate'), spec: { backoffLimit: 2, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'migrate', image: 'app:2', command: ['migrate', '--to', '7'] }] } } } };
const RUST_CHILDREN = [
  [
    'a DaemonSet',
    (d) => d.child(kinds.DaemonSet, { metadata: childMeta('agent', { app: 'x' }), spec: { selector: { matchLabels: { app: 'x' } }, template: POD, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } } } }),
    '{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"5c65b7f10d73598e387efa582e2693cbe63e1ebe203c9125312af20083732f6f"},"labels":{"app":"x"},"name":"agent"},"spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x","é":"ü"}},"spec":{"containers":[{"args":["-v","\u2028<&>"],"image":"agent:1","name":"c","resources":{"limits":{"cpu":"500m"}}}]}},"updateStrategy":{"rollingUpdate":{"maxUnavailable":1},"type":"RollingUpdate"}}}',
  ],
  [
    'a ReplicaSet',
    (d) => d.child(kinds.ReplicaSet, { metadata: childMeta('rs'), spec: { replicas: 2, minReadySeconds: 5, selector: { matchLabels: { app: 'x' } }, template: POD } }),
    '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"947b9f2a5c65c7e3f16b62a102c9f2834a7b043babe7666156b54173c5ec20b4"},"name":"rs"},"spec":{"minReadySeconds":5,"replicas":2,"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x","é":"ü"}},"spec":{"containers":[{"args":["-v","\u2028<&>"],"image":"agent:1","name":"c","resources":{"limits":{"cpu":"500m"}}}]}}}}',
  ],
  [
    'a Job',
    (d) => d.child(kinds.Job, JOB),
    '{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"38a2b67167135236bef85c02162f58770b35e12328f038993370d2d6ad15ff4a"},"name":"migrate"},"spec":{"backoffLimit":2,"template":{"spec":{"containers":[{"command":["migrate","--to","7"],"image":"app:2","name":"migrate"}],"restartPolicy":"Never"}}}}',
  ],
  [
    'the Job of runOnce',
    (d) => d.runOnce(JOB, { image: 'app:2', schema: 7 }),
    '{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"sdk.operator-host.dev/spec-hash":"0d13d9e8532627e33b391467f0ccfa3c8cec1200ce8177a56f75be2be6c37549"},"name":"migrate"},"spec":{"backoffLimit":2,"template":{"metadata":{"annotations":{"sdk.operator-host.dev/content-hash":"2d5743c7d3abb1c3588b5e6e1735197b7f17664f7d7e378226a54a90028a8d11"}},"spec":{"containers":[{"command":["migrate","--to","7"],"image":"app:2","name":"migrate"}],"restartPolicy":"Never"}}}}',
  ],
];

test("every workload kind's child, spec hash and run-once hash equal the Rust SDK's, byte for byte", () => {
  for (const [what, add, rust] of RUST_CHILDREN) {
    const child = add(new Desired()).children[0];
    assert.equal(canonicalJson(child), rust, what);
    const rustHash = /"sdk\.operator-host\.dev\/spec-hash":"([0-9a-f]{64})"/.exec(rust)[1];
    assert.equal(child.metadata.annotations[SPEC_HASH_ANNOTATION], rustHash, what);
  }
  const runOnce = new Desired().runOnce(JOB, { image: 'app:2', schema: 7 }).children[0];
  assert.equal(runOnce.spec.template.metadata.annotations[CONTENT_HASH_ANNOTATION], '2d5743c7d3abb1c3588b5e6e1735197b7f17664f7d7e378226a54a90028a8d11');
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
    { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'j' }, status: { conditions: [{ type: 'Complete', status: true }] } },
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
  const daemonSet = Observed.fromJson(['{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"ds"},"status":{"numberAvailable":2.5}}']);
  assert.throws(() => daemonSet.view(kinds.DaemonSet, 'ds', WorkloadView), { message: 'observed DaemonSet "ds" does not decode: invalid type: floating point `2.5`, expected i32' });
  assert.throws(() => observed.rolloutOf(kinds.Job, 'j', new Desired()), { message: 'observed Job "j" does not decode: invalid type: boolean `true`, expected a borrowed string' });
});
