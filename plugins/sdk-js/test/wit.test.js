// The SDK's copy of the contract must be the repository's contract, byte for byte.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

test('the vendored WIT equals wit/reconciler.wit (contract 0.3.0)', () => {
  const vendored = readFileSync(new URL('../wit/reconciler.wit', import.meta.url));
  const contract = readFileSync(new URL('../../../wit/reconciler.wit', import.meta.url));
  assert.ok(vendored.equals(contract), 'plugins/sdk-js/wit/reconciler.wit differs: copy wit/reconciler.wit over it');
  assert.match(vendored.toString(), /^package operator-host:reconciler@0\.3\.0;$/m);
});
