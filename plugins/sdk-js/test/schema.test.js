// One declaration gives the CRD and the decoding of the parent: serde's messages, defaults, bounds, and a previous status dropped.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidSpec } from '../src/errors.js';
import { canonicalJson, parseJson } from '../src/json.js';
import { setHostLog } from '../src/log.js';
import { defineKind } from '../src/plugin.js';
import { t } from '../src/schema.js';

const Thing = defineKind({
  group: 't.dev',
  version: 'v1',
  kind: 'Thing',
  plural: 'things',
  shortNames: ['th'],
  printerColumns: [{ name: 'Size', type: 'integer', jsonPath: '.spec.size' }],
  spec: t.object(
    {
      size: t.integer({ format: 'int32', minimum: 0, maximum: 10, description: 'How many.' }),
      name: t.string({ default: 'x', maxLength: 5 }),
      mode: t.optional(t.string({ enum: ['Fast', 'Slow'] })),
      tags: t.optional(t.array(t.string())),
      labels: t.optional(t.map(t.string())),
      ratio: t.optional(t.number({ minimum: 0.5 })),
    },
    { required: ['size'], description: 'The spec.' },
  ),
  status: t.object({ phase: t.string({ enum: ['Ready'] }), conditions: t.conditions({ default: [] }) }, { required: ['phase'] }),
});

const thing = (spec, status) => ({ apiVersion: 't.dev/v1', kind: 'Thing', metadata: { name: 'a' }, spec, ...(status === undefined ? {} : { status }) });
const decode = (object) => Thing.decode(parseJson(JSON.stringify(object)));
const message = (f) => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof InvalidSpec, String(e));
    return e.message;
  }
  assert.fail('accepted');
};

test('the CRD is what kube derives: names, columns, schema with f64 bounds, status subresource', () => {
  const crd = Thing.crd();
  assert.equal(crd.metadata.name, 'things.t.dev');
  assert.deepEqual(crd.spec.names, { kind: 'Thing', plural: 'things', singular: 'thing', shortNames: ['th'] });
  assert.equal(crd.spec.scope, 'Namespaced');
  const version = crd.spec.versions[0];
  assert.deepEqual(version.subresources, { status: {} });
  const text = canonicalJson(crd);
  assert.match(text, /"size":\{"description":"How many\.","format":"int32","maximum":10\.0,"minimum":0\.0,"type":"integer"\}/);
  const schema = JSON.parse(text).spec.versions[0].schema.openAPIV3Schema;
  assert.deepEqual(schema.required, ['spec']);
  assert.equal(schema.title, 'Thing');
  assert.deepEqual(schema.properties.spec.required, ['size']);
  assert.equal(schema.properties.spec.properties.name.default, 'x');
  assert.equal(schema.properties.spec.properties.mode.nullable, true);
  assert.equal(schema.properties.status.nullable, true);
  assert.deepEqual(schema.properties.status.properties.conditions['x-kubernetes-list-map-keys'], ['type']);
  assert.deepEqual(version.additionalPrinterColumns, [{ name: 'Size', type: 'integer', jsonPath: '.spec.size' }]);
});

test('decoding fills in defaults and ignores unknown fields', () => {
  const parent = decode(thing({ size: 2, extra: true }));
  assert.deepEqual(parent.spec, { size: 2, name: 'x' });
  assert.equal(parent.metadata.name, 'a');
  assert.equal(parent.status, undefined);
});

test("a value of another type is refused with serde's message and the field's path", () => {
  const invalid = (spec) => message(() => decode(thing(spec)));
  assert.equal(invalid({ size: 'x' }), 'the Thing does not match its schema: spec.size: invalid type: string "x", expected i32');
  assert.equal(invalid({}), 'the Thing does not match its schema: spec: missing field `size`');
  assert.equal(invalid({ size: 1, name: null }), 'the Thing does not match its schema: spec.name: invalid type: null, expected a string');
  assert.equal(invalid({ size: 3000000000 }), 'the Thing does not match its schema: spec.size: invalid value: integer `3000000000`, expected i32');
  assert.equal(invalid({ size: 1, tags: ['a', 2] }), 'the Thing does not match its schema: spec.tags[1]: invalid type: integer `2`, expected a string');
  assert.equal(invalid({ size: 1, labels: { k: false } }), 'the Thing does not match its schema: spec.labels.k: invalid type: boolean `false`, expected a string');
  assert.equal(invalid({ size: 1, mode: 'Warp' }), 'the Thing does not match its schema: spec.mode: unknown variant `Warp`, expected one of `Fast`, `Slow`');
  assert.equal(message(() => Thing.decode(parseJson('{"metadata":{},"spec":{"size":3.0}}'))), 'the Thing does not match its schema: spec.size: invalid type: floating point `3.0`, expected i32');
  assert.equal(message(() => decode({ metadata: {}, spec: 'x' })), 'the Thing does not match its schema: spec: invalid type: string "x", expected struct ThingSpec');
  assert.equal(message(() => decode({ spec: { size: 1 } })), 'the Thing does not match its schema: missing field `metadata`');
});

test("a plain object's fraction in an integer field is serde's error, not a RangeError", () => {
  // Not parsed from JSON text, so no source says how a number was written.
  const plain = (spec) => message(() => Thing.decode(thing(spec)));
  assert.equal(plain({ size: 2.5 }), 'the Thing does not match its schema: spec.size: invalid type: floating point `2.5`, expected i32');
  assert.equal(plain({ size: Number.NaN }), 'the Thing does not match its schema: spec.size: invalid type: floating point `NaN`, expected i32');
  assert.equal(plain({ size: Infinity }), 'the Thing does not match its schema: spec.size: invalid type: floating point `inf`, expected i32');
  assert.equal(plain({ size: 1e20 }), 'the Thing does not match its schema: spec.size: invalid type: floating point `1e+20`, expected i32');
  assert.equal(plain({ size: 3000000000 }), 'the Thing does not match its schema: spec.size: invalid value: integer `3000000000`, expected i32');
  assert.deepEqual(Thing.decode(thing({ size: 3, ratio: 0.75 })).spec, { size: 3, name: 'x', ratio: 0.75 });
});

test('declared bounds are checked after decoding, in declaration order', () => {
  assert.equal(message(() => decode(thing({ size: 11 }))), 'spec.size: must be between 0 and 10, got 11');
  assert.equal(message(() => decode(thing({ size: 11, name: 'toolong' }))), 'spec.size: must be between 0 and 10, got 11');
  assert.equal(message(() => decode(thing({ size: 1, name: 'toolong' }))), 'spec.name: must be at most 5 characters long, got "toolong"');
  assert.equal(message(() => decode(thing({ size: 1, ratio: 0.25 }))), 'spec.ratio: must be at least 0.5, got 0.25');
});

test('a previous status that no longer decodes is dropped with a warning', () => {
  const logged = [];
  setHostLog((level, text) => logged.push([level, text]));
  try {
    const parent = decode(thing({ size: 1 }, { phase: 'RenamedSinceThen' }));
    assert.equal(parent.status, undefined);
    assert.deepEqual(logged, [
      ['warn', "the Thing's previous status does not decode (status.phase: unknown variant `RenamedSinceThen`, expected `Ready`); reconciling it as if it had none"],
    ]);
    assert.deepEqual(decode(thing({ size: 1 }, { phase: 'Ready' })).status, { phase: 'Ready', conditions: [] });
    // An invalid spec is reported whatever the status.
    for (const status of [null, { phase: 'RenamedSinceThen' }]) {
      assert.match(message(() => decode(thing({ size: 'big' }, status))), /^the Thing does not match its schema: spec\.size: invalid type/);
    }
  } finally {
    setHostLog((level, text) => console.error(`[${level}] ${text}`));
  }
});

test('a struct also decodes from the list of its fields, as serde reads one', () => {
  assert.deepEqual(decode(thing([3])).spec, { size: 3, name: 'x' });
  assert.equal(message(() => decode(thing([]))), 'the Thing does not match its schema: spec: invalid length 0, expected struct ThingSpec with 6 elements');
  assert.equal(message(() => decode(thing([1, 'a', null, null, null, null, 7]))), 'the Thing does not match its schema: spec: invalid length 7, expected fewer elements in array');
});
