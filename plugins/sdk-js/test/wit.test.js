// The SDK's copy of the contract must be the repository's contract, byte for byte.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

test('the vendored WIT equals wit/0.1.0/reconciler.wit', () => {
  const vendored = readFileSync(new URL('../wit/reconciler.wit', import.meta.url));
  const contract = readFileSync(new URL('../../../wit/0.1.0/reconciler.wit', import.meta.url));
  assert.ok(vendored.equals(contract), 'plugins/sdk-js/wit/reconciler.wit differs: copy wit/0.1.0/reconciler.wit over it');
});
