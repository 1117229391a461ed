// Contract 0.3.0 on the author's side: the Validation builder, validate/default/convert through the contract's functions, implements flags and several CRD versions.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FieldError, Validation, mergeApply, mergeDiff } from '../src/admission.js';
import { Desired, childMeta, kinds } from '../src/children.js';
import { InvalidSpec, Retry, invalidAt, invalidField } from '../src/errors.js';
import { canonicalJson, parseJson } from '../src/json.js';
import { setHostLog } from '../src/log.js';
import { defineKind, mergeCrds, reconciler } from '../src/plugin.js';
import { t } from '../src/schema.js';

test('field errors print as the API server prints them', () => {
  const validation = new Validation()
    .invalid('spec.size', 0, 'must be between 1 and 10')
    .required('spec.image', 'a container image')
    .immutable('spec.storage', '2Gi')
    .notSupported('spec.mode', 'x', ['a', 'b'])
    .forbidden('spec.secret', 'may not be set here')
    .error({ reason: 'duplicate', field: 'spec.ports[1]', value: 80 })
    .invalid('spec.gone', undefined, 'no value');
  assert.deepEqual(validation.errors.map(String), [
    'spec.size: Invalid value: 0: must be between 1 and 10',
    'spec.image: Required value: a container image',
    'spec.storage: Invalid value: "2Gi": field is immutable',
    'spec.mode: Unsupported value: "x": supported values: "a", "b"',
    'spec.secret: Forbidden: may not be set here',
    'spec.ports[1]: Duplicate value: 80',
    'spec.gone: Invalid value: null: no value',
  ]);
  assert.equal(validation.isValid, false);
  assert.ok(new Validation().warn('w').isValid);
  assert.throws(() => new FieldError({ reason: 'wrong', field: 'spec.a' }), {
    message: 'a field error\'s reason must be one of required, invalid, forbidden, not-supported, duplicate, too-long, too-many, not-found, got "wrong"',
  });
});

test('check turns the invalid-spec error of a reconcile check into a field error, and ignores the rest', () => {
  const validation = new Validation();
  validation.check(() => {
    throw invalidField('size', 'must be at most 100');
  });
  validation.check(invalidAt('metadata.name', 'at most 40 characters'));
  validation.check(new InvalidSpec('no path in this message'));
  validation.check(() => {
    throw new Retry('not a spec problem');
  });
  validation.check(() => 'passes');
  assert.deepEqual(
    validation.errors.map((e) => [e.reason, e.field, e.value, e.detail]),
    [
      ['invalid', 'spec.size', undefined, 'must be at most 100'],
      ['invalid', 'metadata.name', undefined, 'at most 40 characters'],
      ['invalid', 'spec', undefined, 'no path in this message'],
    ],
  );
  assert.equal(String(validation.errors[0]), 'spec.size: Invalid value: must be at most 100');
  assert.throws(() => validation.check(() => null.x), TypeError);
  assert.throws(() => validation.check('spec.size: bad'), { message: 'check takes a function to run or the InvalidSpec it threw, got "spec.size: bad"' });
});

test('a validation throws its errors as one invalid spec, for reconcile', () => {
  new Validation().warn('only a warning').throwIfInvalid();
  const validation = new Validation().invalid('spec.a', 1, 'too small').required('spec.b', 'needed');
  assert.throws(() => validation.throwIfInvalid(), { name: 'InvalidSpec', message: 'spec.a: Invalid value: 1: too small, spec.b: Required value: needed' });
});

test('a merge diff applied gives the after object, and keeps how numbers were written', () => {
  const before = parseJson('{"spec":{"a":1,"b":{"c":2},"gone":true},"status":{}}');
  const after = parseJson('{"spec":{"a":1,"b":{"c":3,"d":[1]},"ratio":2.0},"status":{}}');
  const patch = mergeDiff(before, after);
  assert.equal(canonicalJson(patch), '{"spec":{"b":{"c":3,"d":[1]},"gone":null,"ratio":2.0}}');
  assert.equal(canonicalJson(mergeApply(before, patch)), canonicalJson(after));
  assert.equal(mergeDiff(after, after), undefined);
  assert.equal(canonicalJson(mergeDiff(parseJson('{"a":3}'), parseJson('{"a":3.0}'))), '{"a":3.0}');
});

// A `Gadget` reconciled as v1, served as v1 and v2 (`replicas` a number, then `{count}`).
const spec = { replicas: t.integer({ format: 'int32', minimum: 0, maximum: 50 }), zone: t.string(), image: t.string({ default: 'nginx' }) };
const GadgetV1 = defineKind({ group: 'g.dev', version: 'v1', kind: 'Gadget', plural: 'gadgets', spec: t.object(spec, { required: ['replicas', 'zone'] }) });
const GadgetV2 = defineKind({
  group: 'g.dev',
  version: 'v2',
  kind: 'Gadget',
  plural: 'gadgets',
  spec: t.object({ ...spec, replicas: t.object({ count: t.integer({ format: 'int32' }) }, { required: ['count'] }) }, { required: ['replicas', 'zone'] }),
});

function convertGadget(object, toVersion) {
  const from = String(object.apiVersion).replace(/^g\.dev\//, '');
  if (from === toVersion) return object;
  const converted = { ...object, apiVersion: `g.dev/${toVersion}`, spec: { ...object.spec } };
  if (from === 'v1' && toVersion === 'v2') converted.spec.replicas = { count: object.spec.replicas };
  else if (from === 'v2' && toVersion === 'v1') converted.spec.replicas = object.spec.replicas.count;
  else throw new InvalidSpec(`cannot convert a Gadget from ${JSON.stringify(from)} to ${JSON.stringify(toVersion)}: the versions are v1 and v2`);
  return converted;
}

const gadgets = reconciler({
  name: 'gadgets',
  version: '0.1.0',
  parent: GadgetV1,
  children: [kinds.ConfigMap],
  crd: mergeCrds([GadgetV1.crd(), GadgetV2.crd()], 'v1'),
  reconcile: (gadget) => new Desired().child(kinds.ConfigMap, { metadata: childMeta(gadget.metadata.name) }),
  validate(gadget, old) {
    const validation = new Validation();
    if (gadget.spec.replicas === 13) validation.invalid('spec.replicas', 13, 'unlucky');
    if (gadget.spec.replicas === 14) throw invalidField('replicas', 'must not be 14');
    if (gadget.spec.replicas === 15) throw new Error('a bug in validate');
    if (old !== undefined && old.spec.zone !== gadget.spec.zone) validation.immutable('spec.zone', gadget.spec.zone);
    if (gadget.spec.replicas === 0) validation.warn('no replicas');
    return validation;
  },
  validateDelete: (old) => (old.metadata.labels?.protected === 'true' ? new Validation().forbidden('metadata.labels[protected]', 'unprotect it first') : new Validation()),
  default(gadget) {
    if (gadget.spec.zone === '') gadget.spec.zone = 'a';
    if (gadget.spec.replicas === 99) throw new InvalidSpec('spec.replicas: 99 cannot be defaulted');
  },
  convert: convertGadget,
});

const gadget = (replicas, zone = 'a', extra = {}) => ({ apiVersion: 'g.dev/v1', kind: 'Gadget', metadata: { name: 'g', ...extra.metadata }, spec: { replicas, zone, ...extra.spec } });
const review = (operation, object, old) => ({
  operation,
  object: object && JSON.stringify(object),
  oldObject: old && JSON.stringify(old),
  user: 'tester',
  dryRun: false,
});

test('the handlers given set the implements flags; none given, none set', () => {
  assert.deepEqual(gadgets.info().implements, { validate: true, validateDelete: true, default: true, convert: true });
  const minimal = reconciler({ name: 'm', version: '0.1.0', parent: GadgetV1, children: [], reconcile: () => new Desired(), default: (g) => g });
  assert.deepEqual(minimal.info().implements, { validate: false, validateDelete: false, default: true, convert: false });
  // What the host never calls answers as if nothing were refused or changed.
  assert.deepEqual(minimal.validate(review('create', gadget(13))), { errors: [], warnings: [] });
  assert.throws(() => minimal.convert(JSON.stringify(gadget(1)), 'v2'), (e) => e === 'this plugin does not convert between versions (asked for v2)');
});

test('validate answers field errors and warnings in the contract\'s terms', () => {
  assert.deepEqual(gadgets.validate(review('create', gadget(0))), { errors: [], warnings: ['no replicas'] });
  assert.deepEqual(gadgets.validate(review('update', gadget(13, 'b'), gadget(3))), {
    errors: [
      { reason: 'invalid', field: 'spec.replicas', value: '13', detail: 'unlucky' },
      { reason: 'invalid', field: 'spec.zone', value: '"b"', detail: 'field is immutable' },
    ],
    warnings: [],
  });
  // An invalid spec thrown by validate is its field error, as `check` makes it.
  assert.deepEqual(gadgets.validate(review('create', gadget(14))).errors, [{ reason: 'invalid', field: 'spec.replicas', value: undefined, detail: 'must not be 14' }]);
});

test('a parent that does not decode is refused with the field that does not, before validate', () => {
  assert.deepEqual(gadgets.validate(review('create', gadget('many'))).errors, [
    { reason: 'invalid', field: 'spec.replicas', value: undefined, detail: 'invalid type: string "many", expected i32' },
  ]);
  assert.deepEqual(gadgets.validate(review('create', { apiVersion: 'g.dev/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { zone: 'a' } })).errors, [
    { reason: 'invalid', field: 'spec', value: undefined, detail: 'missing field `replicas`' },
  ]);
  assert.deepEqual(gadgets.validate({ ...review('create'), object: '{"spec":' }).errors, [
    { reason: 'invalid', field: '', value: 'null', detail: 'not JSON: unexpected character at line 1 column 8' },
  ]);
  // An old object that no longer decodes does not refuse the new one: it is validated as a create.
  assert.deepEqual(gadgets.validate(review('update', gadget(3, 'b'), gadget('old'))), { errors: [], warnings: [] });
});

test('the declared bounds refuse at admission what validate let through, as reconcile would', () => {
  assert.deepEqual(gadgets.validate(review('create', gadget(51))).errors, [
    { reason: 'invalid', field: 'spec.replicas', value: undefined, detail: 'must be between 0 and 50, got 51' },
  ]);
  assert.deepEqual(gadgets.runValidate(gadget(51)).errors.map(String), ['spec.replicas: Invalid value: must be between 0 and 50, got 51']);
});

test('deletes go to validateDelete with the old object', () => {
  const protectedGadget = gadget(1, 'a', { metadata: { labels: { protected: 'true' } } });
  assert.deepEqual(gadgets.validate(review('delete', undefined, protectedGadget)).errors, [
    { reason: 'forbidden', field: 'metadata.labels[protected]', value: undefined, detail: 'unprotect it first' },
  ]);
  assert.deepEqual(gadgets.validate(review('delete', undefined, gadget(1))), { errors: [], warnings: [] });
  assert.deepEqual(gadgets.runValidateDelete(protectedGadget).errors.map(String), ['metadata.labels[protected]: Forbidden: unprotect it first']);
});

test('a bug in validate traps after an error line in the host log', () => {
  const logged = [];
  setHostLog((level, text) => logged.push([level, text]));
  try {
    assert.throws(() => gadgets.validate(review('create', gadget(15))), { message: 'a bug in validate' });
    assert.match(logged[0][1], /^the plugin failed: Error: a bug in validate/);
  } finally {
    setHostLog((level, text) => console.error(`[${level}] ${text}`));
  }
});

test('default patches only the fields it changed onto the object as received', () => {
  const received = '{"apiVersion":"g.dev/v1","kind":"Gadget","metadata":{"name":"g","uid":"u-1","labels":{"a":"b"}},"spec":{"replicas":1.0e0,"zone":"","unknown":{"kept":2.50}},"status":{"x":1}}';
  // `replicas` is not an i32 as written, so it does not decode: the object is left for validate.
  assert.equal(gadgets.default(received), received);
  const decodable = received.replace('1.0e0', '1');
  assert.equal(
    gadgets.default(decodable),
    '{"apiVersion":"g.dev/v1","kind":"Gadget","metadata":{"labels":{"a":"b"},"name":"g","uid":"u-1"},"spec":{"replicas":1,"unknown":{"kept":2.5},"zone":"a"},"status":{"x":1}}',
  );
  // Nothing to change: the text as it came, not even re-encoded; `image`'s default is not written in.
  const complete = decodable.replace('"zone":""', '"zone":"b"');
  assert.equal(gadgets.default(complete), complete);
  assert.deepEqual(gadgets.runDefault(gadget(1, '')).spec, { replicas: 1, zone: 'a' });
});

test('default refuses with a message naming what is wrong', () => {
  assert.throws(() => gadgets.default('{"spec":'), (e) => e === 'the object is not JSON: unexpected character at line 1 column 8');
  assert.throws(() => gadgets.default(JSON.stringify(gadget(99, ''))), (e) => e === 'spec.replicas: 99 cannot be defaulted');
});

test('convert goes between the versions, and refuses others with its message', () => {
  const two = gadgets.convert(JSON.stringify(gadget(3)), 'v2');
  assert.equal(two, '{"apiVersion":"g.dev/v2","kind":"Gadget","metadata":{"name":"g"},"spec":{"replicas":{"count":3},"zone":"a"}}');
  assert.equal(gadgets.convert(two, 'v1'), canonicalJson(gadget(3)));
  assert.throws(() => gadgets.convert(two, 'v3'), (e) => e === 'cannot convert a Gadget from "v2" to "v3": the versions are v1 and v2');
  assert.throws(() => gadgets.convert('nope', 'v1'), (e) => e === 'the object is not JSON: unexpected character at line 1 column 0');
  assert.deepEqual(gadgets.runConvert(gadget(4), 'v2').spec.replicas, { count: 4 });
  const broken = reconciler({ name: 'b', version: '0.1.0', parent: GadgetV1, children: [], reconcile: () => new Desired(), convert: () => undefined });
  assert.throws(() => broken.runConvert(gadget(1), 'v2'), { name: 'TypeError', message: 'convert must return the converted object, got null' });
});

test('a CRD of several versions: merged as kube merges them, and only with convert', () => {
  const crd = JSON.parse(gadgets.info().crd);
  assert.deepEqual(crd.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1', true, true], ['v2', true, false]]);
  assert.equal(crd.spec.versions[1].schema.openAPIV3Schema.properties.spec.properties.replicas.type, 'object');
  assert.match(gadgets.info().crd, /"maximum":50\.0/);
  const stored2 = mergeCrds([GadgetV1.crd(), GadgetV2.crd()], 'v2');
  assert.deepEqual(stored2.spec.versions.map((v) => [v.name, v.storage]), [['v2', true], ['v1', false]]);
  assert.throws(() => mergeCrds([GadgetV1.crd()], 'v9'), { message: 'mergeCrds: the storage version "v9" is not one of the versions given (v1)' });
  assert.throws(() => mergeCrds([stored2], 'v2'), { message: 'mergeCrds takes CRDs of one version each (kind.crd()), got one with 2' });
  const other = defineKind({ group: 'other.dev', version: 'v3', kind: 'Gadget', plural: 'gadgets', spec: t.object({}) });
  assert.throws(() => mergeCrds([GadgetV1.crd(), other.crd()], 'v1'), { message: 'mergeCrds: version v3 has group "other.dev", the storage version "g.dev"' });
  assert.throws(
    () => reconciler({ name: 'x', version: '0.1.0', parent: GadgetV1, children: [], crd: stored2, reconcile: () => new Desired() }),
    { message: 'the CRD serves 2 versions (v2, v1): the plugin needs convert(object, toVersion)' },
  );
});

test('a previous status that no longer decodes is dropped at admission, a spec that does not decode is not', () => {
  const Phased = defineKind({
    group: 'g.dev',
    version: 'v1',
    kind: 'Phased',
    plural: 'phaseds',
    spec: t.object({ size: t.integer({ format: 'int32' }) }, { required: ['size'] }),
    status: t.object({ ready: t.integer({ format: 'int32' }) }, { required: ['ready'] }),
  });
  const phased = reconciler({
    name: 'phased',
    version: '0.1.0',
    parent: Phased,
    children: [],
    reconcile: () => new Desired(),
    validate: (parent) => new Validation().warn(`size ${parent.spec.size}, status ${JSON.stringify(parent.status)}`),
  });
  const written = (size) => ({ apiVersion: 'g.dev/v1', kind: 'Phased', metadata: { name: 'p' }, spec: { size }, status: { ready: 'renamed since' } });
  assert.deepEqual(phased.validate(review('create', written(2))), { errors: [], warnings: ['size 2, status undefined'] });
  assert.deepEqual(phased.validate(review('create', written('two'))).errors, [
    { reason: 'invalid', field: 'spec.size', value: undefined, detail: 'invalid type: string "two", expected i32' },
  ]);
});
