// The contract's glue: info, the error variants, requeue times, finalize, and bugs that trap after a log line.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Desired, Observed, childMeta, kinds } from '../src/children.js';
import { Retry, invalidAt, invalidField } from '../src/errors.js';
import { setHostLog } from '../src/log.js';
import { defineKind, reconciler } from '../src/plugin.js';
import { t } from '../src/schema.js';
import { camelCaseReason, condition, readyFromPhase } from '../src/status.js';
import { restrictedContainerSecurityContext, restrictedPodSecurityContext } from '../src/security.js';

const Thing = defineKind({ group: 't.dev', version: 'v1', kind: 'Thing', plural: 'things', spec: t.object({ size: t.integer({ format: 'int32' }) }, { required: ['size'] }) });
const request = (spec, observed = []) => ({ parent: JSON.stringify({ apiVersion: 't.dev/v1', kind: 'Thing', metadata: { name: 'a' }, spec }), observed: observed.map((o) => JSON.stringify(o)) });

const plugin = reconciler({
  name: 'thing',
  version: '1.2.3',
  parent: Thing,
  children: [kinds.ConfigMap],
  reconcile(parent, observed) {
    if (parent.spec.size === 7) throw new Retry('not yet');
    if (parent.spec.size === 8) throw new TypeError('a bug');
    const desired = new Desired().child(kinds.ConfigMap, { metadata: childMeta(parent.metadata.name, { app: 'x' }), data: { n: String(observed.length) } });
    desired.setStatus({ ok: true });
    if (parent.spec.size === 2) desired.requeueAfter(1500);
    return desired;
  },
});

test('info declares the plugin, its kinds and its CRD', () => {
  const info = plugin.info();
  assert.equal(info.name, 'thing');
  assert.equal(info.version, '1.2.3');
  assert.deepEqual(info.parent, { group: 't.dev', version: 'v1', kind: 'Thing', plural: 'things', namespaced: true });
  assert.deepEqual(info.children, [{ group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true }]);
  assert.equal(info.needsFinalize, false);
  assert.equal(JSON.parse(info.crd).kind, 'CustomResourceDefinition');
  assert.deepEqual(info.related, []);
  assert.deepEqual(info.implements, { validate: false, validateDelete: false, default: false, convert: false });
});

test('reconcile answers with canonical JSON and the requeue time as a u64', () => {
  const answer = plugin.reconcile(request({ size: 2 }, [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } }]));
  assert.deepEqual(answer.children, [
    {
      object: '{"apiVersion":"v1","data":{"n":"1"},"kind":"ConfigMap","metadata":{"labels":{"app":"x"},"name":"a"}}',
      update: 'in-place',
      onPrune: 'delete',
      readyWhen: undefined,
    },
  ]);
  assert.equal(answer.status, '{"ok":true}');
  assert.equal(answer.requeueAfterMs, 1500n);
  assert.equal(plugin.reconcile(request({ size: 1 })).requeueAfterMs, undefined);
});

test('invalid specs and retries become the contract error variants', () => {
  assert.throws(() => plugin.reconcile(request({ size: 'x' })), {
    tag: 'invalid-spec',
    val: 'the Thing does not match its schema: spec.size: invalid type: string "x", expected i32',
  });
  assert.throws(() => plugin.reconcile(request({ size: 7 })), { tag: 'retry', val: 'not yet' });
  assert.throws(() => plugin.reconcile({ parent: 'not json', observed: [] }), (e) => e.tag === 'retry' && e.val.startsWith('the parent is not valid JSON: '));
  assert.throws(() => plugin.reconcile({ ...request({ size: 1 }), observed: ['{}', 'not json'] }), (e) => e.tag === 'retry' && e.val.startsWith('observed child #1 is not valid JSON'));
  assert.equal(invalidField('size', 'must be 1').message, 'spec.size: must be 1');
  assert.equal(invalidAt('metadata.name', 'too long').message, 'metadata.name: too long');
});

test('a bug traps (as a Rust panic) after an error line in the host log', () => {
  const logged = [];
  setHostLog((level, text) => logged.push([level, text]));
  try {
    assert.throws(() => plugin.reconcile(request({ size: 8 })), TypeError);
    assert.equal(logged[0][0], 'error');
    assert.match(logged[0][1], /^the plugin failed: TypeError: a bug/);
  } finally {
    setHostLog((level, text) => console.error(`[${level}] ${text}`));
  }
});

test('finalize is done unless the plugin defines it', () => {
  assert.deepEqual(plugin.finalize(request({ size: 1 })), { done: true, requeueAfterMs: undefined });
  const finalizing = reconciler({ name: 'f', version: '0.1.0', parent: Thing, children: [], reconcile: () => new Desired(), finalize: () => ({ done: false, requeueAfterMs: 2000 }) });
  assert.equal(finalizing.info().needsFinalize, true);
  assert.deepEqual(finalizing.finalize(request({ size: 1 })), { done: false, requeueAfterMs: 2000n });
});

test('run takes plain objects, for unit tests', () => {
  const desired = plugin.run({ apiVersion: 't.dev/v1', kind: 'Thing', metadata: { name: 'b' }, spec: { size: 1 } });
  assert.ok(desired instanceof Desired);
  assert.equal(desired.get(kinds.ConfigMap, 'b').data.n, '0');
  assert.equal(new Observed([]).length, 0);
});

test('children carry their kind, and metadata only a name and labels', () => {
  const desired = new Desired().child(kinds.Service, { metadata: childMeta('svc') });
  assert.deepEqual(desired.children[0], { apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc' } });
  desired.child({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' }, spec: { replicas: 1 } });
  assert.equal(desired.get(kinds.Deployment, 'd').metadata.annotations['sdk.operator-host.dev/spec-hash'].length, 64);
  assert.throws(() => desired.child({ metadata: {} }), TypeError);
});

test('conditions: a Ready condition with a CamelCase reason from a phase', () => {
  for (const [phase, reason] of [['ONLINE_PARTIAL', 'OnlinePartial'], ['online-partial', 'OnlinePartial'], ['Running', 'Running'], ['RolloutComplete', 'RolloutComplete'], ['3 members', 'Members'], ['', 'Unknown']]) {
    const c = readyFromPhase(phase, true, 'm', 2);
    assert.deepEqual(c, { type: 'Ready', status: 'True', reason, message: 'm', observedGeneration: 2 }, phase);
    assert.equal(camelCaseReason(phase), reason);
  }
  assert.equal(readyFromPhase('Pending', false, '').status, 'False');
  assert.deepEqual(condition('Available', false, 'R', 'm'), { type: 'Available', status: 'False', reason: 'R', message: 'm' });
});

test('restricted security contexts', () => {
  assert.deepEqual(restrictedPodSecurityContext(), { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  assert.deepEqual(restrictedPodSecurityContext(27), { runAsNonRoot: true, runAsUser: 27, runAsGroup: 27, fsGroup: 27, seccompProfile: { type: 'RuntimeDefault' } });
  assert.deepEqual(restrictedContainerSecurityContext(), { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
});
