// The port of the Rust SDK's resources.rs tests: same rules, same messages.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidSpec } from '../src/errors.js';
import { canonicalQuantity, validateContainerResources } from '../src/resources.js';

const check = (requests, limits) => {
  try {
    validateContainerResources('resources', { requests, limits });
    return undefined;
  } catch (e) {
    assert.ok(e instanceof InvalidSpec, String(e));
    return e.message;
  }
};

function rejected(requests, limits, field, why) {
  const message = check(requests, limits);
  assert.ok(message !== undefined, 'accepted');
  assert.ok(message.startsWith(`spec.resources${field}: `) && message.includes(why), `${message} does not name ${field} with ${why}`);
}

test('quantities in every form of the grammar are canonicalized', () => {
  for (const [quantity, canonical] of [
    ['1', '1'], ['+1', '1'], ['1.', '1'], ['.5', '500m'], ['0.1', '100m'], ['1.5', '1500m'], ['1000m', '1'],
    ['2000', '2k'], ['1024', '1024'], ['0.1n', '1n'], ['1.0000000001', '1000000001n'], ['100u', '100u'],
    ['5M', '5M'], ['9E', '9E'], ['1.5Gi', '1536Mi'], ['2048Ki', '2Mi'], ['1000Ki', '1000Ki'], ['0.5Ki', '512'],
    ['1Ei', '1Ei'], ['0Gi', '0'], ['-0', '0'], ['-1.5', '-1500m'], ['1e3', '1e3'], ['1000E-3', '1'],
    ['1500e-3', '1500e-3'], ['1e+3', '1e3'], ['1e0', '1'], ['1e-0', '1'], ['2E00', '2'], ['1e-1000', '1e-9'], ['00012', '12'],
    ['0.000000000000000000000000000000000000000001', '1n'], ['9223372036854775807', '9223372036854775807'],
  ]) {
    assert.equal(canonicalQuantity(quantity), canonical, quantity);
  }
});

test('text outside the grammar is not a quantity', () => {
  for (const quantity of ['', 'not-a-quantity', '.', '-', '1.2.3', '1e', '1e+', '1e1.5', '1Ki3', '1i', '1 ', ' 1', '--1', '1KI', '1K', '0x10', '1mi']) {
    assert.throws(() => canonicalQuantity(quantity), /must be a quantity/, quantity);
  }
  for (const quantity of ['10E', '9223372036854775808', '8Ei', '1e19', '1e1000']) {
    assert.throws(() => canonicalQuantity(quantity), /at most 2\^63-1/, quantity);
  }
});

test('names are standard or fully qualified', () => {
  for (const name of ['cpu', 'memory', 'ephemeral-storage', 'example.com/gpu', 'kubernetes.io/x']) {
    assert.equal(check(undefined, { [name]: '1' }), undefined, name);
  }
  assert.equal(check(undefined, { 'hugepages-2Mi': '2Mi', memory: '1Gi' }), undefined);
  for (const name of ['k', 'pods', 'requests.cpu', 'gpu']) {
    rejected(undefined, { [name]: '1' }, `.limits[${JSON.stringify(name)}]`, 'must be a standard resource for containers');
  }
  for (const name of ['bad key', '-k-', 'k-', 'example.com/', 'Example.com/gpu', 'a/b/c', '/gpu']) {
    rejected({ [name]: '1' }, undefined, `.requests[${JSON.stringify(name)}]`, 'not a resource name');
  }
  const long = `${'a.'.repeat(121)}com/gpu`;
  for (const name of ['requests.example.com/gpu', long]) {
    rejected(undefined, { [name]: '1' }, `.limits[${JSON.stringify(name)}]`, 'extended resource name standard');
  }
});

test('quantities must parse and not be negative', () => {
  rejected(undefined, { k: 'not-a-quantity' }, '.limits["k"]', 'standard resource');
  rejected(undefined, { cpu: 'not-a-quantity' }, '.limits["cpu"]', 'must be a quantity');
  assert.equal(
    check(undefined, { cpu: 'x y' }),
    'spec.resources.limits["cpu"]: must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi, got "x y"',
  );
  rejected({ memory: '-1' }, undefined, '.requests["memory"]', 'greater than or equal to 0');
  rejected({ memory: '10E' }, undefined, '.requests["memory"]', 'at most 2^63-1');
});

test('extended resources are whole and need an equal limit', () => {
  const gpu = 'example.com/gpu';
  rejected(undefined, { [gpu]: '500m' }, '.limits["example.com/gpu"]', 'whole units');
  rejected({ [gpu]: '1' }, undefined, '.limits["example.com/gpu"]', 'must be set');
  rejected({ [gpu]: '1' }, { [gpu]: '2' }, '.requests["example.com/gpu"]', 'must equal');
  assert.equal(check({ [gpu]: '2' }, { [gpu]: '2' }), undefined);
  assert.equal(check({ [gpu]: '1k' }, { [gpu]: '1000' }), undefined);
  assert.equal(check({ cpu: '1' }, { cpu: '2' }), undefined);
  assert.equal(check({ cpu: '1', 'kubernetes.io/x': '1' }, undefined), undefined);
});

test('a request is at most its limit', () => {
  rejected({ cpu: '2' }, { cpu: '1' }, '.requests["cpu"]', 'at most the limit');
  assert.equal(check({ cpu: '1001m' }, { cpu: '1' }), 'spec.resources.requests["cpu"]: must be at most the limit of cpu (1), got 1001m');
  assert.equal(check({ cpu: '1000m' }, { cpu: '1' }), undefined);
  assert.equal(check({ memory: '1Gi' }, { memory: '1073741824' }), undefined);
});

test('huge pages are whole pages with an equal limit and cpu or memory', () => {
  const memory = { memory: '1Gi' };
  rejected(undefined, { 'hugepages-x': '1' }, '.limits["hugepages-x"]', 'page size');
  rejected(undefined, { 'hugepages-0': '1' }, '.limits["hugepages-0"]', 'page size');
  rejected(undefined, { 'hugepages-1.5': '3' }, '.limits["hugepages-1.5"]', 'page size');
  const field = '.limits["hugepages-2Mi"]';
  rejected(undefined, { 'hugepages-2Mi': '3Mi', ...memory }, field, 'multiple of the page size 2Mi');
  const huge = { 'hugepages-2Mi': '4Mi' };
  rejected(huge, memory, field, 'must be set');
  rejected({ 'hugepages-2Mi': '2Mi' }, { ...huge, ...memory }, '.requests["hugepages-2Mi"]', 'must equal');
  rejected(huge, huge, '', 'huge pages require a cpu or memory');
  assert.equal(check({ ...huge, cpu: '1' }, huge), undefined);
  assert.equal(check(huge, { ...huge, ...memory }), undefined);
});

test('claims are refused: the pod declares none', () => {
  assert.throws(
    () => validateContainerResources('resources', { claims: [{ name: 'gpu' }, { name: 'a"b' }] }),
    { message: 'spec.resources.claims: must be empty: a claim must name one of the pod\'s resourceClaims, and the pod declares none (got ["gpu", "a\\"b"])' },
  );
});

test('the value is what the API server stores', () => {
  assert.deepEqual(validateContainerResources('resources', { claims: [], limits: {}, requests: {} }), {});
  assert.deepEqual(validateContainerResources('resources', { requests: { cpu: '0.5', memory: '1.5Gi' }, limits: { cpu: '1000m' } }), {
    limits: { cpu: '1' },
    requests: { cpu: '500m', memory: '1536Mi' },
  });
  assert.throws(() => validateContainerResources('x.res', { requests: { k: '1' } }), /^InvalidSpec: spec\.x\.res\.requests\["k"\]: /);
  // The first problem in the order of the names' bytes, limits before requests, as the Rust port.
  assert.match(check({ b: 'x', a: '1' }, undefined), /requests\["a"\]/);
  assert.match(check({ a: '1' }, { z: '1' }), /limits\["z"\]/);
});
