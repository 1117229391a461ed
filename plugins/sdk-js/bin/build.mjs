#!/usr/bin/env node
// Builds a plugin module into an operator-host component: `operator-host-componentize ENTRY.js -o OUT.wasm`.
//
// componentize-js loads the entry as an ES module inside the component, where only relative
// imports resolve. So the plugin's module graph is copied into a work directory as it is
// (relative imports only, no bundler), the SDK beside it with `@operator-host/sdk` pointed at
// it, and a generated entry module hands the component's `host-log` import to the SDK and
// re-exports the plugin's `plugin`. Then componentize-js builds it against the SDK's copy of
// the contract 0.3.0 (wit/reconciler.wit, a copy of the repository's wit/reconciler.wit).

import { componentize } from '@bytecodealliance/componentize-js';
import { init, parse } from 'es-module-lexer';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const SDK_NAME = '@operator-host/sdk';
const SDK_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WIT = join(SDK_ROOT, 'wit');
const HOST_LOG = 'operator-host:reconciler/host-log@0.3.0';

const USAGE = `usage: operator-host-componentize ENTRY.js -o OUT.wasm [--debug]

Builds the plugin module ENTRY.js (which exports \`plugin\`, made with the SDK's
\`reconciler(...)\`) into a WebAssembly component of the operator-host contract.
Its imports must be relative paths or ${SDK_NAME}.
  -o OUT.wasm   where to write the component
  --debug       use componentize-js's debug engine build (names section, larger)`;

/** Thrown for a problem of the input, reported without a stack once the work directory is gone. */
class BuildError extends Error {}

function fail(message) {
  throw new BuildError(message);
}

function exit(message) {
  console.error(`operator-host-componentize: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { entry: undefined, out: undefined, debug: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      console.log(USAGE);
      process.exit(0);
    } else if (arg === '-o' || arg === '--out') {
      args.out = argv[++i];
    } else if (arg === '--debug') {
      args.debug = true;
    } else if (arg.startsWith('-')) {
      fail(`unknown option ${arg}\n${USAGE}`);
    } else if (args.entry === undefined) {
      args.entry = arg;
    } else {
      fail(`one entry module only\n${USAGE}`);
    }
  }
  if (args.entry === undefined || args.out === undefined) fail(USAGE);
  return args;
}

/** A relative import specifier from `fromFile` to `toFile`, both in the work directory. */
function specifier(fromFile, toFile) {
  const path = relative(dirname(fromFile), toFile).split(sep).join('/');
  return path.startsWith('.') ? path : `./${path}`;
}

/** `source` with the import specifiers the lexer found replaced by `rewrite(name)`. */
function rewriteImports(source, file, rewrite) {
  const [imports] = parse(source, file);
  let out = '';
  let last = 0;
  for (const entry of imports) {
    // Dynamic imports with a computed specifier have no name: they cannot be followed.
    if (entry.n === undefined) fail(`${file}: an import() with a computed specifier cannot be built`);
    const replacement = rewrite(entry.n);
    if (replacement === undefined) continue;
    out += source.slice(last, entry.s) + replacement;
    last = entry.e;
  }
  return out + source.slice(last);
}

/**
 * Copies `entry` and every module it imports (relative paths) under `dir`/plugin, keeping
 * their layout relative to the entry's directory; returns the copied entry's path.
 */
function copyPlugin(entry, dir, sdkIndex) {
  const root = dirname(entry);
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const rel = relative(root, file);
    if (rel.startsWith('..')) fail(`${file}: a plugin's modules must be in its entry's directory or below`);
    const target = join(dir, 'plugin', rel);
    mkdirSync(dirname(target), { recursive: true });
    let source;
    try {
      source = readFileSync(file, 'utf8');
    } catch (e) {
      fail(`cannot read ${file}: ${e.message}`);
    }
    const next = [];
    const rewritten = rewriteImports(source, file, (name) => {
      if (name === SDK_NAME) return specifier(target, sdkIndex);
      if (name.startsWith('./') || name.startsWith('../')) {
        next.push(resolve(dirname(file), name));
        return undefined;
      }
      if (name.startsWith('operator-host:')) return undefined;
      fail(`${file}: cannot import ${JSON.stringify(name)}: only relative modules and ${SDK_NAME} are built in`);
    });
    writeFileSync(target, rewritten);
    next.forEach(visit);
  };
  visit(entry);
  return join(dir, 'plugin', relative(root, entry));
}

function copyDir(from, to) {
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) {
    const path = join(from, name);
    if (statSync(path).isDirectory()) copyDir(path, join(to, name));
    else copyFileSync(path, join(to, name));
  }
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
} catch (e) {
  exit(e.message);
}
const entry = resolve(args.entry);
const out = resolve(args.out);
await init;

// Builds are not reproducible: the engine's snapshot holds state seeded from WASI randomness
// at build time (and the paths below), so two builds of the same sources differ.
const dir = mkdtempSync(join(tmpdir(), 'operator-host-componentize-'));
let failure;
try {
  copyDir(join(SDK_ROOT, 'src'), join(dir, 'sdk'));
  const sdkIndex = join(dir, 'sdk', 'index.js');
  const pluginEntry = copyPlugin(entry, dir, sdkIndex);
  const main = join(dir, 'main.js');
  writeFileSync(
    main,
    [
      '// Generated by operator-host-componentize: the SDK logs through the host, the plugin is exported.',
      `import { log } from '${HOST_LOG}';`,
      `import { setHostLog } from '${specifier(main, join(dir, 'sdk', 'log.js'))}';`,
      'setHostLog(log);',
      `export { plugin } from '${specifier(main, pluginEntry)}';`,
      '',
    ].join('\n'),
  );
  // componentize-js maps the current directory into the component when the source is under it.
  process.chdir(dir);
  const { component } = await componentize({
    sourcePath: main,
    witPath: WIT,
    worldName: 'reconciler',
    // No network in the sandbox; stdio (uncaught errors reach the host's log), random and
    // clocks are WASI imports the host provides (deterministic, frozen).
    disableFeatures: ['http', 'fetch-event'],
    debugBuild: args.debug,
  });
  mkdirSync(dirname(out), { recursive: true });
  // Written whole, then renamed: a host watching the directory never loads half a file.
  writeFileSync(`${out}.tmp`, component);
  renameSync(`${out}.tmp`, out);
  console.error(`wrote ${out} (${component.length} bytes)`);
} catch (e) {
  failure = e instanceof BuildError ? e.message : e?.stack ?? String(e);
} finally {
  process.chdir(SDK_ROOT);
  rmSync(dir, { recursive: true, force: true });
}
if (failure !== undefined) exit(failure);
