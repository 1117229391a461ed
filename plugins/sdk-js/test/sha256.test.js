// The pure-JS SHA-256 against published vectors and Node's own.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { sha256Hex } from '../src/sha256.js';

test('FIPS 180-2 vectors', () => {
  assert.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(
    sha256Hex('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  );
  assert.equal(sha256Hex('a'.repeat(1_000_000)), 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
});

test('every length around the block boundaries, and UTF-8 text, as node:crypto', () => {
  for (let n = 0; n < 200; n++) {
    const text = 'é☃'.repeat(n % 7) + 'x'.repeat(n);
    assert.equal(sha256Hex(text), createHash('sha256').update(text).digest('hex'), `length ${n}`);
  }
  const bytes = Uint8Array.from({ length: 300 }, (_, i) => (i * 37) & 0xff);
  assert.equal(sha256Hex(bytes), createHash('sha256').update(bytes).digest('hex'));
});
