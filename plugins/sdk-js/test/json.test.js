// Canonical JSON equal to serde_json's, the parser that remembers numbers, and Rust's string Debug.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JsonFloat, canonicalJson, numberSource, parseJson, rustDebugString, rustFloatDisplay, serdeFloat } from '../src/json.js';
import { contentHash } from '../src/view.js';

test('maps are sorted by key bytes, with no spaces and undefined members left out', () => {
  assert.equal(canonicalJson({ b: 1, a: [true, null, 'x'], c: undefined, A: {} }), '{"A":{},"a":[true,null,"x"],"b":1}');
  // U+FFFF sorts before U+10000 in UTF-8 (code point order), not in UTF-16.
  assert.equal(canonicalJson({ '\u{10000}': 1, '\uffff': 2 }), '{"\uffff":2,"\u{10000}":1}');
});

test('strings are escaped as serde_json escapes them', () => {
  assert.equal(canonicalJson('a/b é 😀'), '"a/b é 😀"');
  assert.equal(canonicalJson('"\\\b\f\n\r\t\u0001\u001f\u007f'), '"\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u007f"');
});

test('numbers are written as serde_json writes i64, u64 and f64', () => {
  assert.equal(canonicalJson([0, -5, 9007199254740991, 12n]), '[0,-5,9007199254740991,12]');
  assert.equal(canonicalJson([new JsonFloat(100), new JsonFloat(0), 0.5, 1.5e-7, 1e21, new JsonFloat(1e15), 1e16]), '[100.0,0.0,0.5,1.5e-7,1e+21,1000000000000000.0,1e+16]');
  assert.equal(canonicalJson([NaN, Infinity]), '[null,null]');
  assert.equal(serdeFloat(123.456), '123.456');
  assert.equal(serdeFloat(0.00001), '0.00001');
  assert.equal(serdeFloat(0.000001), '1e-6');
  assert.equal(serdeFloat(1.2345678901234568e20), '1.2345678901234568e+20');
  assert.equal(rustFloatDisplay(1e21), '1000000000000000000000');
  assert.equal(rustFloatDisplay(1.5e-7), '0.00000015');
  assert.equal(rustFloatDisplay(2), '2');
});

test('the parser remembers floats and big integers, and writes them back unchanged', () => {
  const text = '{"a":3.0,"b":[1,2.5,1e3,9007199254740993],"c":"x\\ny","__proto__":1}';
  const value = parseJson(text);
  assert.equal(value.a, 3);
  assert.equal(numberSource(value, 'a'), '3.0');
  assert.equal(numberSource(value.b, 0), undefined);
  assert.equal(numberSource(value.b, 3), '9007199254740993');
  assert.deepEqual(Object.keys(value), ['a', 'b', 'c', '__proto__']);
  assert.equal(canonicalJson(value), '{"__proto__":1,"a":3.0,"b":[1,2.5,1000.0,9007199254740993],"c":"x\\ny"}');
  assert.throws(() => parseJson('{"a":1e400}'), /number out of range at line 1 column 10/);
  assert.throws(() => parseJson('{"a":1} x'), SyntaxError);
});

test('content hashes equal the Rust SDK pinned one', () => {
  // Pinned in plugins/sdk/src/view.rs: a hash that changed would roll every pod that carries it.
  assert.equal(contentHash({ a: '1', b: '2' }), '21f76dfbfe6dfe21f762080ef484112cf2952974cef30741fd1931e1c6d92112');
  assert.equal(contentHash({ b: '2', a: '1' }), contentHash({ a: '1', b: '2' }));
  assert.notEqual(contentHash({ a: '1', b: '3' }), contentHash({ a: '1', b: '2' }));
});

test("strings in messages are quoted as Rust's {:?} quotes them", () => {
  assert.equal(rustDebugString('bad image'), '"bad image"');
  assert.equal(rustDebugString('a"b\\c\n\t\r\0'), '"a\\"b\\\\c\\n\\t\\r\\0"');
  assert.equal(rustDebugString('\u0001\u007f\u00a0\u200b\u0301é'), '"\\u{1}\\u{7f}\\u{a0}\\u{200b}\\u{301}é"');
});

test("the table of escaped characters is Rust's set: grapheme extenders and Cc Cf Cs Co Cn Zl Zp Zs but ' '", async () => {
  const { escapedByRustDebug } = await import('../src/unicode.js');
  // Node has Unicode property escapes (the component's engine does not); checked where the
  // Unicode versions agree, every 7th code point for time.
  const re = /^[\p{Grapheme_Extend}\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;
  for (let c = 0; c < 0x110000; c += c < 0x3000 ? 1 : 7) {
    assert.equal(escapedByRustDebug(c), c !== 0x20 && re.test(String.fromCodePoint(c)), `U+${c.toString(16)}`);
  }
});
