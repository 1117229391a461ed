// The recommended labels (the Rust SDK's labels.rs test, ported) and kube's name_any.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appLabels, canonicalJson, componentLabels, nameAny } from '../src/index.js';

test('componentLabels add the component to the appLabels', () => {
  const labels = componentLabels('webapp', 'shop', 'server');
  assert.deepEqual(labels, {
    'app.kubernetes.io/component': 'server',
    'app.kubernetes.io/instance': 'shop',
    'app.kubernetes.io/name': 'webapp',
  });
  for (const [key, value] of Object.entries(appLabels('webapp', 'shop'))) assert.equal(labels[key], value);
  // In the order the Rust SDK's BTreeMap serializes them, so children render alike.
  assert.equal(JSON.stringify(labels), canonicalJson(labels));
  assert.equal(JSON.stringify(appLabels('webapp', 'shop')), canonicalJson(appLabels('webapp', 'shop')));
});

test('nameAny is the name, else the generateName prefix, else empty', () => {
  assert.equal(nameAny({ metadata: { name: 'a', generateName: 'a-' } }), 'a');
  assert.equal(nameAny({ metadata: { generateName: 'a-' } }), 'a-');
  assert.equal(nameAny({ metadata: { name: '', generateName: 'a-' } }), 'a-');
  assert.equal(nameAny({ metadata: {} }), '');
  assert.equal(nameAny({}), '');
});
