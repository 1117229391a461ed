// JSON as the Rust SDK sees it: a parser that remembers how numbers were written, and serde_json's output.

import { escapedByRustDebug } from './unicode.js';

/**
 * A number that serializes as a float (`100.0`), as serde_json writes an `f64`: the CRD's
 * `minimum`/`maximum` are `f64` in k8s-openapi, so the Rust SDK's CRD says `100.0`.
 */
export class JsonFloat {
  /** @param {number} value */
  constructor(value) {
    this.value = value;
  }
  toJSON() {
    return this.value;
  }
}

// How each number that JS cannot tell apart was written: container -> key -> source text.
// Only floats (`3.0`, `1e3`) and integers beyond 2^53 are recorded; serde_json reads them
// as f64, u64 or i64, which a decoder must know to answer as the Rust SDK does.
const lexemes = new WeakMap();

/**
 * How the number at `container[key]` was written in the JSON text it was parsed from, when
 * that matters: a float (`3.0`) or an integer JS cannot hold exactly. `undefined` for every
 * other value (a plain integer is exactly its JS value).
 * @param {object} container
 * @param {string | number} key
 * @returns {string | undefined}
 */
export function numberSource(container, key) {
  return lexemes.get(container)?.get(key);
}

/**
 * Makes `to[toKey]` written as `from[fromKey]` was (a float stays `3.0`), for a number copied
 * from one parsed object into another.
 * @param {object} from
 * @param {string | number} fromKey
 * @param {object} to
 * @param {string | number} toKey
 */
export function copyNumberSource(from, fromKey, to, toKey) {
  const source = numberSource(from, fromKey);
  if (source !== undefined) remember(to, toKey, source);
}

function remember(container, key, text) {
  let map = lexemes.get(container);
  if (!map) lexemes.set(container, (map = new Map()));
  map.set(key, text);
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

/**
 * Parses JSON text like `JSON.parse`, remembering which numbers were floats or beyond 2^53
 * (see `numberSource`). Throws a `SyntaxError` naming the offset of bad input.
 * @param {string} text
 * @returns {any}
 */
export function parseJson(text) {
  let i = 0;
  const fail = (what) => {
    // Where, as serde_json says it.
    const lineStart = text.lastIndexOf('\n', i - 1) + 1;
    const line = text.slice(0, lineStart).split('\n').length;
    throw new SyntaxError(`${what} at line ${line} column ${i - lineStart}`);
  };
  const space = () => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else return;
    }
  };
  const string = () => {
    // Fast path: no escapes.
    const end = text.indexOf('"', i + 1);
    if (end < 0) fail('unterminated string');
    const raw = text.slice(i, end + 1);
    if (raw.indexOf('\\') < 0 && !/[\u0000-\u001f]/.test(raw)) {
      i = end + 1;
      return raw.slice(1, -1);
    }
    const match = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
    match.lastIndex = i;
    const found = match.exec(text);
    if (!found) fail('invalid string');
    i = match.lastIndex;
    return JSON.parse(found[0]);
  };
  // Returns the value and, for a number to remember, its text.
  const value = (container, key) => {
    space();
    const c = text[i];
    if (c === '{') {
      i++;
      const object = {};
      space();
      if (text[i] === '}') {
        i++;
        return object;
      }
      for (;;) {
        space();
        if (text[i] !== '"') fail('expected a key');
        const k = string();
        space();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        // Own data property even for `__proto__`, as JSON.parse does.
        Object.defineProperty(object, k, {
          value: value(object, k),
          enumerable: true,
          writable: true,
          configurable: true,
        });
        space();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return object;
        } else fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const array = [];
      space();
      if (text[i] === ']') {
        i++;
        return array;
      }
      for (;;) {
        array.push(value(array, array.length));
        space();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return array;
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    NUMBER.lastIndex = i;
    const found = NUMBER.exec(text);
    if (!found) fail('unexpected character');
    i = NUMBER.lastIndex;
    const number = Number(found[0]);
    // serde_json refuses what no f64 holds; the host never sends it.
    if (!Number.isFinite(number)) fail('number out of range');
    if (found[1] !== undefined || found[2] !== undefined || !Number.isSafeInteger(number)) {
      if (container !== undefined) remember(container, key, found[0]);
    }
    return number;
  };
  const result = value(undefined, undefined);
  space();
  if (i !== text.length) fail('trailing characters');
  return result;
}

/**
 * Digits and decimal exponent of a finite non-zero `x`: `x = 0.d1d2... * 10^point`, with the
 * shortest digits that read back as `x` (what both ryu and Rust's float formatting print).
 */
function shortest(x) {
  const [mantissa, exponent] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  return { digits, point: Number(exponent) + 1 };
}

/**
 * `x` as Rust's `Display` of an `f64` writes it: never an exponent (`1e21` is
 * `1000000000000000000000`), `1` for `1.0`.
 * @param {number} x
 */
export function rustFloatDisplay(x) {
  if (Number.isNaN(x)) return 'NaN';
  const sign = x < 0 || Object.is(x, -0) ? '-' : '';
  if (!Number.isFinite(x)) return `${sign}inf`;
  if (x === 0) return `${sign}0`;
  const { digits, point } = shortest(x);
  if (point >= digits.length) return sign + digits + '0'.repeat(point - digits.length);
  if (point > 0) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  return `${sign}0.${'0'.repeat(-point)}${digits}`;
}

/**
 * `x` as serde_json writes an `f64` (with zmij, its float formatter): `100.0`, `0.001`,
 * `1e+16`, `1.5e-7`; `inf`, `-inf` and `NaN` for the others (serde_json's errors name them so,
 * its output writes them as null).
 * @param {number} x
 */
export function serdeFloat(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const { digits, point } = shortest(x);
  // Fixed notation for decimal exponents -5..=15, scientific beyond.
  const exponent = point - 1;
  if (exponent >= -5 && exponent <= 15) {
    if (digits.length <= point) return `${sign}${digits}${'0'.repeat(point - digits.length)}.0`;
    if (point > 0) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
    return `${sign}0.${'0'.repeat(-point)}${digits}`;
  }
  const rest = digits.length === 1 ? '' : `.${digits.slice(1)}`;
  return `${sign}${digits[0]}${rest}e${exponent < 0 ? '-' : '+'}${Math.abs(exponent)}`;
}

// Rust orders map keys by their UTF-8 bytes, which is code point order; JS's default sort
// compares UTF-16 units, which differs only for characters above U+FFFF.
export function byCodePoint(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i);
    const y = b.codePointAt(i);
    if (x !== y) return x < y ? -1 : 1;
    if (x > 0xffff) i++;
  }
  return a.length < b.length ? -1 : 1;
}

/**
 * `value` as serde_json's `to_string` writes a `serde_json::Value` (maps sorted by key, no
 * spaces, '/' and non-ASCII unescaped): the text the Rust SDK hashes. Safe integers are
 * integers, other numbers floats as ryu writes them, `JsonFloat`s floats, BigInts integers.
 * `undefined` members are left out and functions refused, as they have no JSON.
 * @param {any} value
 * @returns {string}
 */
export function canonicalJson(value) {
  return write(value, undefined);
}

/**
 * `container[key]` as `canonicalJson` writes it inside `container`: a number as it was
 * written where it was parsed (`3.0` stays a float).
 * @param {object} container
 * @param {string | number} key
 */
export function canonicalJsonAt(container, key) {
  return write(container[key], numberSource(container, key));
}

// serde_json writes a non-finite float as null.
function floatJson(x) {
  return Number.isFinite(x) ? serdeFloat(x) : 'null';
}

// `source` is how a parsed number was written (see `numberSource`): a float stays a float
// (`3.0`), an integer beyond 2^53 keeps every digit, as serde_json would write them back.
function write(value, source) {
  switch (typeof value) {
    case 'string':
      // JSON.stringify escapes exactly as serde_json does: `"`, `\`, \b\f\n\r\t, other
      // control characters as \u00xx (lower-case hex).
      return JSON.stringify(value);
    case 'number':
      if (source !== undefined) {
        if (/[.eE]/.test(source)) return floatJson(value);
        const integer = BigInt(source);
        if (integer <= 18446744073709551615n && integer >= -9223372036854775808n) return integer.toString();
        return floatJson(value);
      }
      return Number.isInteger(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER && !Object.is(value, -0)
        ? String(value)
        : floatJson(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (value instanceof JsonFloat) return floatJson(value.value);
      if (Array.isArray(value)) {
        const items = value.map((item, i) => (item === undefined ? 'null' : write(item, numberSource(value, i))));
        return `[${items.join(',')}]`;
      }
      if (typeof value.toJSON === 'function') return write(value.toJSON(), undefined);
      const keys = Object.keys(value)
        .filter((k) => value[k] !== undefined)
        .sort(byCodePoint);
      return `{${keys.map((k) => `${JSON.stringify(k)}:${write(value[k], numberSource(value, k))}`).join(',')}}`;
    }
    default:
      throw new TypeError(`cannot write a ${typeof value} as JSON`);
  }
}

/**
 * `text` as Rust's `{:?}` writes a string: quoted, with `"` `\` and control characters
 * escaped (`\n`, `\u{1b}`). Used in messages that must equal the Rust SDK's.
 * @param {string} text
 */
export function rustDebugString(text) {
  let out = '"';
  for (const ch of text) {
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\0') out += '\\0';
    else if (escapedByRustDebug(ch.codePointAt(0))) out += `\\u{${ch.codePointAt(0).toString(16)}}`;
    else out += ch;
  }
  return `${out}"`;
}
