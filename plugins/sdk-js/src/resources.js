// Container compute resources the API server accepts, in the form it stores them (a port of the Rust SDK's resources.rs: same rules, same messages).
//
// A plugin that copies a user's `resources` into a container must check what the API server
// checks of them (`ValidateContainerResourceRequirements`), or the child's apply fails with a
// 422 the user only sees as `ApplyFailed`; and it must write them as the API server stores
// them (no empty maps or lists, quantities in canonical form), or the live child never equals
// what the plugin applies. Arithmetic is exact, in BigInt, with the Rust port's i128 limits
// where they change a result.

import { invalidField } from './errors.js';
import { byCodePoint, rustDebugString } from './json.js';

/** Units of a nano (10^-9): the finest precision a Kubernetes quantity keeps. */
const NANO = 1_000_000_000n;
/** The largest magnitude accepted, in nanos: 2^63-1 units. */
const MAX_NANOS = 9223372036854775807n * NANO;
/** Significant digits kept exactly; further digits only round the value up. */
const KEPT_DIGITS = 30;
/** i128::MAX, where the Rust port's checked arithmetic gives up. */
const I128_MAX = (1n << 127n) - 1n;

const STANDARD = ['cpu', 'memory', 'ephemeral-storage'];
const HUGE_PAGES_PREFIX = 'hugepages-';

const NOT_A_QUANTITY =
  'must be a quantity: a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E) or exponent (e3), such as 500m, 2 or 1.5Gi';
const TOO_LARGE = 'must be at most 2^63-1 (9223372036854775807)';

/** Thrown inside this module for a quantity outside the grammar or range. */
class QuantityError extends Error {}

/**
 * Checks `resources`, the compute resources of one container, the way the API server does, and
 * returns them as the API server stores them: empty `claims`, `limits` and `requests` left
 * out, every quantity canonical (`1.5` is `1500m`, `1.5Gi` is `1536Mi`).
 *
 * `field` is the path under `spec` (e.g. `resources`); errors are `InvalidSpec` naming the
 * entry, e.g. `spec.resources.requests["k"]: ...`.
 * @param {string} field
 * @param {{claims?: {name: string}[], limits?: Record<string, string>, requests?: Record<string, string>}} resources
 * @returns {{limits?: Record<string, string>, requests?: Record<string, string>}}
 */
export function validateContainerResources(field, resources) {
  const claims = resources.claims ?? [];
  if (claims.length > 0) {
    const names = claims.map((c) => rustDebugString(c.name ?? '')).join(', ');
    throw invalidField(
      `${field}.claims`,
      `must be empty: a claim must name one of the pod's resourceClaims, and the pod declares none (got [${names}])`,
    );
  }
  const limits = parseList(`${field}.limits`, resources.limits);
  const requests = parseList(`${field}.requests`, resources.requests);
  for (const [name, request] of requests) {
    const at = `${field}.requests[${rustDebugString(name)}]`;
    const limit = limits.get(name);
    if (limit !== undefined && !overcommitAllowed(name) && request.nanos !== limit.nanos) {
      throw invalidField(
        at,
        `must equal the limit of ${name} (${canonical(limit)}): ${name} cannot be overcommitted, got ${canonical(request)}`,
      );
    }
    if (limit !== undefined && request.nanos > limit.nanos) {
      throw invalidField(at, `must be at most the limit of ${name} (${canonical(limit)}), got ${canonical(request)}`);
    }
    if (limit === undefined && !overcommitAllowed(name)) {
      throw invalidField(
        `${field}.limits[${rustDebugString(name)}]`,
        `must be set (to the request, ${canonical(request)}): ${name} cannot be overcommitted, so a request needs an equal limit`,
      );
    }
  }
  const names = [...limits.keys(), ...requests.keys()];
  if (names.some(isHugePages) && !names.some((n) => n === 'cpu' || n === 'memory')) {
    throw invalidField(field, 'huge pages require a cpu or memory request or limit');
  }
  const result = {};
  if (limits.size > 0) result.limits = canonicalList(limits);
  if (requests.size > 0) result.requests = canonicalList(requests);
  return result;
}

/**
 * The canonical form of the quantity `quantity` (what the API server stores for it).
 * Throws an `Error` saying why it is not a Kubernetes quantity.
 * @param {string} quantity
 * @returns {string}
 */
export function canonicalQuantity(quantity) {
  try {
    return canonical(parseQuantity(quantity));
  } catch (e) {
    if (e instanceof QuantityError) throw new Error(e.message);
    throw e;
  }
}

function canonicalList(list) {
  const out = {};
  for (const [name, q] of list) out[name] = canonical(q);
  return out;
}

// Entries in the order of their names' bytes, as the Rust port's BTreeMap visits them.
function parseList(field, list) {
  const parsed = new Map();
  for (const name of Object.keys(list ?? {}).sort(byCodePoint)) {
    const quantity = list[name];
    const at = `${field}[${rustDebugString(name)}]`;
    const badName = checkName(name);
    if (badName !== undefined) throw invalidField(at, badName);
    let value;
    try {
      value = parseQuantity(quantity);
    } catch (e) {
      if (!(e instanceof QuantityError)) throw e;
      throw invalidField(at, `${e.message}, got ${rustDebugString(quantity)}`);
    }
    const badValue = checkValue(name, value);
    if (badValue !== undefined) throw invalidField(at, badValue);
    parsed.set(name, value);
  }
  return parsed;
}

function isHugePages(name) {
  return name.startsWith(HUGE_PAGES_PREFIX);
}

/** A resource in the `kubernetes.io` namespace: unqualified, or with `kubernetes.io/` in it. */
function isNative(name) {
  return !name.includes('/') || name.includes('kubernetes.io/');
}

/** A request may be below its limit: native resources except huge pages. */
function overcommitAllowed(name) {
  return isNative(name) && !isHugePages(name);
}

/** A qualified name outside `kubernetes.io`, which the API server checks again as `requests.<name>`. */
function isExtended(name) {
  return !isNative(name) && !name.startsWith('requests.') && isQualifiedName(`requests.${name}`);
}

function checkName(name) {
  if (!isQualifiedName(name)) {
    return `${rustDebugString(name)} is not a resource name: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit`;
  }
  if (!name.includes('/')) {
    if (!(STANDARD.includes(name) || isHugePages(name))) {
      return `${rustDebugString(name)} must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or fully qualified (e.g. example.com/gpu)`;
    }
  } else if (!isNative(name) && !isExtended(name)) {
    return `${rustDebugString(name)} does not follow the extended resource name standard (a domain of at most 244 characters, not starting with "requests.", '/', a name)`;
  }
  return undefined;
}

function checkValue(name, value) {
  if (value.nanos < 0n) return `must be greater than or equal to 0, got ${canonical(value)}`;
  if (isExtended(name) && value.nanos % NANO !== 0n) {
    return `${name} is counted in whole units, got ${canonical(value)}`;
  }
  if (isHugePages(name)) {
    const size = name.slice(HUGE_PAGES_PREFIX.length);
    let page;
    try {
      page = parseQuantity(size);
    } catch (e) {
      if (!(e instanceof QuantityError)) throw e;
    }
    if (page === undefined || !(page.nanos > 0n && page.nanos % NANO === 0n)) {
      return `${rustDebugString(name)}: the page size ${rustDebugString(size)} must be a positive whole quantity such as 2Mi`;
    }
    // The API server compares whole units, the quantity's rounded up.
    if (((value.nanos + NANO - 1n) / NANO) % (page.nanos / NANO) !== 0n) {
      return `must be a whole multiple of the page size ${canonical(page)}, got ${canonical(value)}`;
    }
  }
  return undefined;
}

const isAsciiAlphanumeric = (c) => /^[A-Za-z0-9]$/.test(c);

/** `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name at most 63 of `[A-Za-z0-9_.-]`. */
function isQualifiedName(value) {
  const slash = value.indexOf('/');
  const prefix = slash < 0 ? undefined : value.slice(0, slash);
  const name = slash < 0 ? value : value.slice(slash + 1);
  const nameOk =
    name.length > 0 &&
    utf8Length(name) <= 63 &&
    isAsciiAlphanumeric(name[0]) &&
    isAsciiAlphanumeric(name[name.length - 1]) &&
    /^[A-Za-z0-9_.-]*$/.test(name);
  return nameOk && (prefix === undefined || isDnsSubdomain(prefix));
}

function isDnsSubdomain(value) {
  const labelOk = (l) => l.length > 0 && /^[a-z0-9-]*$/.test(l) && !l.startsWith('-') && !l.endsWith('-');
  return value.length > 0 && utf8Length(value) <= 253 && value.split('.').every(labelOk);
}

function utf8Length(text) {
  return new TextEncoder().encode(text).length;
}

/** How a quantity is written, which its canonical form keeps. */
const BINARY_SI = 'BinarySI';
const DECIMAL_SI = 'DecimalSI';
const DECIMAL_EXPONENT = 'DecimalExponent';

const SUFFIXES = {
  Ki: [BINARY_SI, 10n, 0n],
  Mi: [BINARY_SI, 20n, 0n],
  Gi: [BINARY_SI, 30n, 0n],
  Ti: [BINARY_SI, 40n, 0n],
  Pi: [BINARY_SI, 50n, 0n],
  Ei: [BINARY_SI, 60n, 0n],
  n: [DECIMAL_SI, 0n, -9n],
  u: [DECIMAL_SI, 0n, -6n],
  m: [DECIMAL_SI, 0n, -3n],
  '': [DECIMAL_SI, 0n, 0n],
  k: [DECIMAL_SI, 0n, 3n],
  M: [DECIMAL_SI, 0n, 6n],
  G: [DECIMAL_SI, 0n, 9n],
  T: [DECIMAL_SI, 0n, 12n],
  P: [DECIMAL_SI, 0n, 15n],
  E: [DECIMAL_SI, 0n, 18n],
};

/** 10^s when it fits an i128 (s <= 38), as the Rust port's `checked_pow`. */
function checkedPow10(s) {
  return s <= 38n ? 10n ** s : undefined;
}

/**
 * A quantity's value in nanos (exact, rounded up to the nano) and its format.
 * @returns {{nanos: bigint, format: string}}
 */
function parseQuantity(text) {
  const bad = () => new QuantityError(NOT_A_QUANTITY);
  if (typeof text !== 'string') throw bad();
  let i = 0;
  let negative = false;
  if (text[0] === '-') {
    i++;
    negative = true;
  } else if (text[0] === '+') {
    i++;
  }
  // The number: digits, an optional point and digits, at least one digit in all.
  let mantissa = 0n;
  let significant = 0;
  let scale = 0n; // value = mantissa * 10^scale
  let sticky = false; // a non-zero digit beyond KEPT_DIGITS was dropped
  let digits = 0;
  let point = false;
  while (i < text.length) {
    const c = text[i];
    if (c >= '0' && c <= '9') {
      digits++;
      const d = BigInt(c.charCodeAt(0) - 48);
      if (significant < KEPT_DIGITS) {
        mantissa = mantissa * 10n + d;
        if (mantissa !== 0n) significant++;
        if (point) scale -= 1n;
      } else {
        sticky ||= d !== 0n;
        if (!point) scale += 1n;
      }
    } else if (c === '.' && !point) {
      point = true;
    } else {
      break;
    }
    i++;
  }
  if (digits === 0) throw bad();
  const suffix = text.slice(i);
  let format;
  let binary;
  let exponent;
  if (Object.hasOwn(SUFFIXES, suffix)) {
    [format, binary, exponent] = SUFFIXES[suffix];
  } else {
    if (suffix[0] !== 'e' && suffix[0] !== 'E') throw bad();
    const rest = suffix.slice(1);
    let sign = 1n;
    let number = rest;
    if (rest[0] === '-') {
      sign = -1n;
      number = rest.slice(1);
    } else if (rest[0] === '+') {
      number = rest.slice(1);
    }
    if (number === '' || !/^[0-9]+$/.test(number)) throw bad();
    // As the Rust port: the digits after leading zeros (only zeros, as in `1e0`, is 0), capped
    // at 1000; beyond ±1000 is out of range either way.
    const trimmed = number.replace(/^0+/, '');
    let magnitude = trimmed === '' ? 0n : BigInt(trimmed);
    if (magnitude > 1000n) magnitude = 1000n;
    format = DECIMAL_EXPONENT;
    binary = 0n;
    exponent = sign * magnitude;
  }
  // nanos = mantissa * 2^binary * 10^(scale + exponent + 9), rounded up.
  let shift = scale + exponent + 9n;
  let value = mantissa;
  if (binary > 0n) {
    const factor = 1n << binary;
    // Make room by dropping digits that the division below would drop anyway.
    while (value * factor > I128_MAX && shift < 0n) {
      sticky ||= value % 10n !== 0n;
      value /= 10n;
      shift += 1n;
    }
    value *= factor;
    if (value > I128_MAX) throw new QuantityError(TOO_LARGE);
  }
  if (shift >= 0n) {
    if (value !== 0n) {
      const factor = shift <= 0xffffffffn ? checkedPow10(shift) : undefined;
      if (factor === undefined) throw new QuantityError(TOO_LARGE);
      value *= factor;
      if (value > I128_MAX) throw new QuantityError(TOO_LARGE);
    }
  } else {
    const divisor = -shift <= 0xffffffffn ? checkedPow10(-shift) : undefined;
    if (divisor !== undefined) {
      sticky ||= value % divisor !== 0n;
      value /= divisor;
    } else {
      sticky ||= value !== 0n;
      value = 0n;
    }
  }
  if (sticky) value += 1n;
  if (value > MAX_NANOS) throw new QuantityError(TOO_LARGE);
  return { nanos: negative ? -value : value, format };
}

/**
 * The API server's canonical form: no precision lost, no fractional digits, the largest suffix
 * of the quantity's format that allows that (a binary quantity below 1024 or with a fraction
 * is written decimal).
 */
function canonical({ nanos, format }) {
  if (nanos === 0n) return '0';
  const sign = nanos < 0n ? '-' : '';
  const magnitude = nanos < 0n ? -nanos : nanos;
  if (format === BINARY_SI && magnitude >= 1024n * NANO && magnitude % NANO === 0n) {
    let units = magnitude / NANO;
    let power = 0;
    while (units % 1024n === 0n && power < 6) {
      units /= 1024n;
      power++;
    }
    return `${sign}${units}${['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}`;
  }
  // Decimal: strip the factors of 10, then lower the exponent to a multiple of 3.
  let mantissa = magnitude;
  let exponent = -9;
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent++;
  }
  while (((exponent % 3) + 3) % 3 !== 0) {
    mantissa *= 10n;
    exponent--;
  }
  let suffix;
  if (format === DECIMAL_EXPONENT) suffix = exponent === 0 ? '' : `e${exponent}`;
  // At most 2^63-1 units and at least a nano: -9 <= exponent <= 18.
  else suffix = ['n', 'u', 'm', '', 'k', 'M', 'G', 'T', 'P', 'E'][(exponent + 9) / 3];
  return `${sign}${mantissa}${suffix}`;
}
