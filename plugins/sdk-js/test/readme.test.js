// The README's examples as written: every block parses as a module, the whole ones run, and
// the fragments (`// ...` for the fields shown elsewhere) run once those fields are filled in.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const sdk = fileURLToPath(new URL('../src/index.js', import.meta.url));
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const blocks = [...readme.matchAll(/```js\n(.*?)```/gs)].map((m) => m[1]);
const dir = mkdtempSync(join(tmpdir(), 'sdk-js-readme-'));

/** The block that contains `marker`. */
function block(marker) {
  const found = blocks.filter((b) => b.includes(marker));
  assert.equal(found.length, 1, `one README block holds ${marker}`);
  return found[0];
}

/** `source` as a module file importing this SDK where the README imports the package. */
function moduleFile(name, source) {
  const path = join(dir, `${name}.mjs`);
  writeFileSync(path, source.replaceAll("'@operator-host/sdk'", JSON.stringify(pathToFileURL(sdk).href)));
  return path;
}

/** The SDK's `names` that `source` does not import itself, imported. */
function imports(names, source) {
  const imported = [...source.matchAll(/import \{([^}]*)\} from '@operator-host\/sdk'/g)]
    .flatMap((m) => m[1].split(',').map((n) => n.trim()));
  const missing = names.filter((n) => !imported.includes(n));
  return missing.length ? `import { ${missing.join(', ')} } from '@operator-host/sdk';` : '';
}

/** The module of `source`, with the SDK's `names` it leaves out imported and `prelude` (the
 * helpers it leaves out) before it (a module's imports come first wherever they are written). */
async function load(name, source, names = [], prelude = '') {
  return import(pathToFileURL(moduleFile(name, `${imports(names, source)}\n${prelude}\n${source}`)).href);
}

const thing = (spec) => ({ apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name: 'a', namespace: 'default', generation: 1 }, spec });

test('the README has its examples', () => {
  assert.ok(blocks.length >= 6, `${blocks.length} js blocks`);
});

test('every block parses as a module', () => {
  blocks.forEach((source, index) => {
    execFileSync(process.execPath, ['--check', moduleFile(`block-${index}`, source)]);
  });
});

test('the plugin reconciles a Thing into a Deployment, not Ready before its rollout', async () => {
  const { plugin } = await load('plugin', block("name: 'thing', version: '0.1.0'"));
  const desired = plugin.run(thing({ size: 2 }), []);
  const [deployment] = desired.children;
  assert.equal(deployment.kind, 'Deployment');
  assert.equal(deployment.spec.replicas, 2);
  assert.equal(deployment.spec.template.spec.containers[0].image, 'nginx');
  const [ready] = desired.status.conditions;
  assert.deepEqual([ready.type, ready.status, ready.reason], ['Ready', 'False', 'DeploymentNotFound']);
  assert.throws(() => plugin.run(thing({ size: 11 }), []), /spec.size: must be between 0 and 10, got 11/);
});

test('the migration runs once before the server, and Ready waits for both', async () => {
  const prelude = `function server(parent) {
      const labels = componentLabels('app', parent.metadata.name, 'server');
      return { metadata: childMeta(parent.metadata.name, labels), spec: { replicas: 1, selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { containers: [{ name: 'server', image: parent.spec.image }] } } } };
    }`;
  const { reconcile } = await load('rollout', block('desired.runOnce({'), [], prelude);
  const { Observed } = await import(pathToFileURL(sdk).href);
  const desired = reconcile(thing({ image: 'app:1', migration: ['migrate'] }), new Observed([]));
  assert.deepEqual(desired.children.map((c) => c.kind), ['Job', 'Deployment']);
  const job = desired.children[0];
  assert.equal(job.spec.template.metadata.labels['app.kubernetes.io/component'], 'migration');
  const conditions = Object.fromEntries(desired.status.conditions.map((c) => [c.type, c]));
  assert.equal(conditions.Ready.status, 'False');
  assert.equal(conditions.MigrationComplete.reason, 'NotCreated');
  assert.equal(conditions.Available.reason, 'NotCreated');
});

test('the related objects, child options, admission and conversion fragments run', async () => {
  const names = ['Desired', 'defineKind', 'reconciler', 't'];
  const prelude = `const Thing = defineKind({ group: 'example.com', version: 'v1', kind: 'Thing', plural: 'things',
      spec: t.object({ size: t.integer({ format: 'int32' }), image: t.string({ default: 'busybox' }),
        storage: t.string({ default: '1Gi' }) }, { required: ['size'] }) });
    function validateSpec() {}`;
  const filled = (source, fields) => source.replace('// ...', fields);

  const { plugin: related } = await load('related', filled(block('Related.byNameAt'),
    "name: 'web', version: '0.1.0', parent: Thing, children: [],"), names, prelude);
  assert.deepEqual(related.info().related.map((r) => r.name), ['tls', 'config']);

  const options = `const desired = new Desired();
    const migration = { metadata: { name: 'm' }, spec: {} }, database = { metadata: { name: 'db' }, spec: {} };
    const app = { metadata: { name: 'app' }, spec: {} }, data = { metadata: { name: 'data' }, spec: {} };`;
  await load('options', `${options}\n${block('desired.childWith(kinds.Job')}`, names, prelude);

  const { plugin: admission } = await load('admission', filled(block('new Validation()'),
    "name: 'thing', version: '0.1.0', parent: Thing, children: [], reconcile: () => new Desired(),"), names, prelude);
  const shrunk = admission.runValidate(thing({ size: 0, image: 'busybox:1', storage: '2Gi' }), thing({ size: 1, storage: '1Gi' }));
  assert.deepEqual(shrunk.errors.map(String), ['spec.storage: Invalid value: "2Gi": field is immutable']);
  assert.deepEqual(shrunk.warnings, ['a: no pod runs at size 0']);
  assert.equal(admission.runDefault(thing({ size: 1, image: 'memcached' })).spec.image, 'memcached:1.6.39-alpine');

  const { plugin: gadgets } = await load('convert', filled(block('mergeCrds(['),
    "name: 'gadget', version: '0.1.0', children: [], reconcile: () => new Desired(),"), names, prelude);
  const v1 = { apiVersion: 'g.dev/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { replicas: 3 } };
  const v2 = gadgets.runConvert(v1, 'v2');
  assert.deepEqual(v2.spec, { replicas: { count: 3 } });
  assert.deepEqual(gadgets.runConvert(v2, 'v1'), v1);
  assert.throws(() => gadgets.runConvert(v1, 'v3'), /the versions are v1 and v2/);
});
