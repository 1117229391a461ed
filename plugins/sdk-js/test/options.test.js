// Contract 0.2.0 on the author's side: child options in the response, related resources in info and in the request.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Desired, Observed, childMeta, kindOf, kinds } from '../src/children.js';
import { defineKind, reconciler } from '../src/plugin.js';
import { ChildOptions, Related } from '../src/options.js';
import { t } from '../src/schema.js';
import { CONTENT_HASH_ANNOTATION, WorkloadView } from '../src/view.js';

const Site = defineKind({
  group: 't.dev',
  version: 'v1',
  kind: 'Site',
  plural: 'sites',
  spec: t.object({ tls: t.object({ secretName: t.string({ default: '' }) }, { default: {} }) }),
});

const declared = [
  Related.byNameAt('tls', kinds.Secret, 'spec.tls.secretName'),
  Related.byLabels('config', kinds.ConfigMap, 'app=web,tier in (a,b)').withSecretData(),
];

// Echoes the related objects it was given into a ConfigMap, then adds children with every option.
const plugin = reconciler({
  name: 'site',
  version: '0.1.0',
  parent: Site,
  children: [kinds.ConfigMap, kinds.Job, kinds.Deployment],
  related: declared,
  reconcile(parent, observed) {
    const secrets = observed.related('tls');
    const configs = observed.related('config');
    const desired = new Desired();
    desired.runOnce({ metadata: childMeta('migrate') }, { schema: 3 });
    desired.childWith(kinds.ConfigMap, { metadata: childMeta('seen'), data: { tls: secrets.map((s) => s.metadata.name).join(','), config: String(configs.length), undeclared: String(observed.related('nope').length) } }, new ChildOptions().createOnly().orphanOnPrune());
    desired.childWith({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: childMeta('web'), spec: { replicas: 2 } }, new ChildOptions().readyWhenField('status.readyReplicas', 2));
    desired.child(kinds.ConfigMap, { metadata: childMeta('after') });
    return desired;
  },
});

const site = { apiVersion: 't.dev/v1', kind: 'Site', metadata: { name: 's' }, spec: { tls: { secretName: 'cert' } } };

test('info declares the related resources as the contract spells them', () => {
  assert.deepEqual(plugin.info().related, [
    {
      name: 'tls',
      kind: { group: '', version: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
      selector: { tag: 'name-from-path', val: 'spec.tls.secretName' },
      secretView: 'data-hash',
    },
    {
      name: 'config',
      kind: { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
      selector: { tag: 'label-selector', val: 'app=web,tier in (a,b)' },
      secretView: 'full',
    },
  ]);
});

test("the request's related objects reach the author by name, and each child's options reach the response", () => {
  const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'cert' }, data: { 'tls.crt': 'YWJj' } };
  const answer = plugin.reconcile({
    parent: JSON.stringify(site),
    observed: [],
    related: [
      { name: 'tls', objects: [JSON.stringify(secret)] },
      { name: 'config', objects: [] },
    ],
  });
  const records = answer.children.map(({ object, ...options }) => [JSON.parse(object).metadata.name, options]);
  assert.deepEqual(records, [
    ['migrate', { update: 'recreate', onPrune: 'delete', readyWhen: { tag: 'condition', val: 'Complete' } }],
    ['seen', { update: 'create-only', onPrune: 'orphan', readyWhen: undefined }],
    ['web', { update: 'in-place', onPrune: 'delete', readyWhen: { tag: 'field-equals', val: { path: 'status.readyReplicas', value: '2' } } }],
    ['after', { update: 'in-place', onPrune: 'delete', readyWhen: undefined }],
  ]);
  assert.deepEqual(JSON.parse(answer.children[1].object).data, { tls: 'cert', config: '0', undeclared: '0' });
});

test('a related object that is not JSON is a retry naming it', () => {
  const request = { parent: JSON.stringify(site), observed: [], related: [{ name: 'tls', objects: ['{}', '{'] }] };
  assert.throws(() => plugin.reconcile(request), (e) => e.tag === 'retry' && e.val.startsWith('related tls #1 is not valid JSON: '));
});

test('related objects decode by a type, and one that does not decode is a retry naming it', () => {
  const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' }, spec: { replicas: 3 } };
  const observed = new Observed().withRelated('workloads', [deployment]);
  assert.equal(observed.related('workloads', WorkloadView)[0].spec.replicas, 3);
  assert.deepEqual(observed.related('missing', WorkloadView), []);
  observed.withRelated('workloads', [{ ...deployment, metadata: { name: 'bad' }, spec: { replicas: 'three' } }]);
  assert.throws(() => observed.related('workloads', WorkloadView), {
    name: 'Retry',
    message: 'observed Deployment "bad" does not decode: invalid type: string "three", expected i32',
  });
});

test('run takes related objects by name, as a request carries them', () => {
  const desired = plugin.run(site, [], { tls: [{ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'a' } }], config: [{}, {}] });
  assert.deepEqual(desired.get(kinds.ConfigMap, 'seen').data, { tls: 'a', config: '2', undeclared: '0' });
  assert.equal(desired.optionsOf(kinds.ConfigMap, 'seen').update, 'create-only');
  assert.ok(desired.optionsOf(kinds.ConfigMap, 'after') instanceof ChildOptions);
  assert.deepEqual({ ...desired.optionsOf(kinds.ConfigMap, 'after') }, { update: 'in-place', onPrune: 'delete', readyWhen: undefined });
  assert.equal(desired.optionsOf(kinds.ConfigMap, 'absent'), undefined);
});

test('a run-once Job is recreated behind a barrier and its template changes with its inputs', () => {
  const hash = (inputs) => new Desired().runOnce({ metadata: childMeta('m') }, inputs).children[0].spec.template.metadata.annotations[CONTENT_HASH_ANNOTATION];
  assert.equal(hash({ schema: 3 }), hash({ schema: 3 }));
  assert.notEqual(hash({ schema: 3 }), hash({ schema: 4 }));
  assert.match(hash({ schema: 3 }), /^[0-9a-f]{64}$/);
  const desired = new Desired().runOnce({ metadata: childMeta('m') }, 1);
  assert.equal(desired.children[0].kind, 'Job');
  assert.deepEqual({ ...desired.optionsOf(kinds.Job, 'm') }, { update: 'recreate', onPrune: 'delete', readyWhen: { condition: 'Complete' } });
});

test('children pushed directly get the default options', () => {
  const desired = new Desired();
  desired.children.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'raw' } });
  desired.childWith(kinds.ConfigMap, { metadata: childMeta('kept') }, new ChildOptions().orphanOnPrune());
  assert.deepEqual(desired.options.map((o) => o.onPrune), ['delete', 'orphan']);
});

test('options are values: a builder leaves the options it started from as they were', () => {
  const base = new ChildOptions();
  const recreate = base.recreate();
  assert.equal(base.update, 'in-place');
  assert.equal(recreate.update, 'recreate');
  assert.deepEqual({ ...new ChildOptions({ update: 'create-only', readyWhen: { condition: 'Ready' } }) }, { update: 'create-only', onPrune: 'delete', readyWhen: { condition: 'Ready' } });
  assert.equal(base.readyWhenField('status.phase', 'Running').readyWhen.value, '"Running"');
});

test('bad options and declarations are refused with what was expected', () => {
  assert.throws(() => new ChildOptions({ update: 'replace' }), { message: 'update must be one of "in-place", "recreate", "create-only", got "replace"' });
  assert.throws(() => new ChildOptions({ readyWhen: { path: 'status.x' } }), { message: 'readyWhen must be {condition: "Type"} or {path: "status.field", value: "<JSON text>"}, got {"path":"status.x"}' });
  assert.throws(() => new ChildOptions().readyWhenField('status.x', undefined), { message: 'readyWhenField("status.x") needs a value that JSON can hold' });
  assert.throws(() => new Desired().childWith(kinds.ConfigMap, { metadata: childMeta('x') }, { update: 'recreate' }), { message: 'childWith takes the child and a ChildOptions (new ChildOptions().recreate(), ...)' });
  assert.throws(() => Related.byNameAt('TLS', kinds.Secret, 'spec.tls'), { message: 'a related resource\'s name must be a DNS-1123 label (e.g. "tls"), got "TLS"' });
  assert.throws(() => new Related('tls', kinds.Secret, { path: 'spec.tls' }), { message: 'related tls: the selector must be {nameFromPath: "spec.x"} or {labelSelector: "app=web"}' });
  assert.throws(() => new Related('tls', kinds.Secret, { nameFromPath: 'spec.tls' }, 'clear'), { message: 'related tls: secretView must be one of "data-hash", "full", got "clear"' });
  const twice = { name: 'x', version: '0.1.0', parent: Site, children: [], reconcile: () => new Desired() };
  assert.throws(() => reconciler({ ...twice, related: [declared[0], declared[0]] }), { message: 'related tls is declared twice: each related resource needs a name of its own' });
  assert.throws(() => reconciler({ ...twice, related: [{ name: 'tls' }] }), { message: 'related must be a list of Related (Related.byNameAt(...), Related.byLabels(...))' });
});

test('run refuses a child of a kind the plugin did not declare, in the host\'s words', () => {
  const sneaky = reconciler({
    name: 'sneaky',
    version: '0.1.0',
    parent: Site,
    children: [kinds.ConfigMap],
    reconcile: () => new Desired().child(kindOf('', 'v1', 'Secret', 'secrets'), { metadata: childMeta('s') }),
  });
  assert.throws(() => sneaky.run(site), { name: 'TypeError', message: 'v1/Secret "s" is not a kind the plugin declared (v1/ConfigMap)' });
});
