// A small schema builder: one declaration gives the CRD's OpenAPI schema and the decoding and validation of what it declares.
//
// Decoding follows serde (what the Rust SDK's derived types do): the same values are accepted,
// missing fields take their defaults, unknown fields are ignored, and the first problem is
// reported with its path (`spec.size: invalid type: string "x", expected i32`). Declared
// bounds (`minimum`, `maximum`, `minLength`, `maxLength`, `pattern`, `enum`) are checked after
// decoding, in declaration order, as a plugin's own `validate` would: `spec.size: must be
// between 0 and 100, got 101`.

import { JsonFloat, numberSource, rustDebugString, rustFloatDisplay, serdeFloat } from './json.js';
import { QUANTITY, RESOURCE_REQUIREMENTS } from './k8s-schemas.js';

/** A value that does not decode, with the path of the field (serde_path_to_error's format). */
export class DecodeError extends Error {
  /**
   * @param {(string|number)[]} path field names and array indices from the decoded value's top
   * @param {string} problem serde's message, e.g. `invalid type: null, expected i32`
   */
  constructor(path, problem) {
    const where = formatPath(path);
    super(where === '.' ? problem : `${where}: ${problem}`);
    this.name = 'DecodeError';
    this.path = [...path];
    this.problem = problem;
  }
}

/** `spec.items[0].name`, or `.` for the top, as serde_path_to_error writes a path. */
export function formatPath(path) {
  if (path.length === 0) return '.';
  let out = '';
  path.forEach((segment, i) => {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += (i === 0 ? '' : '.') + segment;
  });
  return out;
}

/** The path of a field for a validation message: `spec.a.b`, `spec.items[0]`, `spec.labels["k"]`. */
function fieldPath(base, segment, kind) {
  if (kind === 'index') return `${base}[${segment}]`;
  if (kind === 'key') return `${base}[${rustDebugString(segment)}]`;
  return base === '' ? segment : `${base}.${segment}`;
}

const U64_MAX = 18446744073709551615n;
const I64_MIN = -9223372036854775808n;


/**
 * What serde_json reads a JSON number as: `{integer: BigInt}` for one that fits u64 or i64,
 * else `{float: number}`. `source` is how it was written (see `numberSource`), if it matters.
 */
function readNumber(value, source) {
  if (source === undefined) {
    // A number of a plain object (or an integer of parsed JSON text): a whole one is exactly
    // its value; any other (2.5, NaN, Infinity) is a float, as serde_json has it from an f64.
    if (!Number.isInteger(value)) return { float: value };
    const integer = BigInt(value);
    return integer > U64_MAX || integer < I64_MIN ? { float: value } : { integer };
  }
  if (/[.eE]/.test(source)) return { float: Number(source) };
  const integer = BigInt(source);
  if (integer > U64_MAX || integer < I64_MIN) return { float: Number(source) };
  return { integer };
}

/** serde's description of an unexpected JSON value: `string "x"`, `integer \`5\``, `map`. */
export function unexpected(value, source) {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'boolean':
      return `boolean \`${value}\``;
    case 'string':
      return `string ${rustDebugString(value)}`;
    case 'number': {
      const read = readNumber(value, source);
      return 'integer' in read ? `integer \`${read.integer}\`` : `floating point \`${serdeFloat(read.float)}\``;
    }
    default:
      return Array.isArray(value) ? 'sequence' : 'map';
  }
}

function invalidType(path, value, source, expecting) {
  return new DecodeError(path, `invalid type: ${unexpected(value, source)}, expected ${expecting}`);
}

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A deep copy of a JSON value (a default must not be shared between decoded values). */
function copy(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

/** The base of every schema type: its OpenAPI schema, decoding and checks. */
export class Type {
  /** @param {{description?: string, default?: any, nullable?: boolean}} [options] */
  constructor(options = {}) {
    this.description = options.description;
    this.hasDefault = Object.hasOwn(options, 'default');
    this.default = options.default;
    // What serde says when the Rust type differs (`a borrowed string` for a `&str`).
    this.expectingOverride = options.expecting;
  }

  /** What serde says it expected, e.g. `i32`, `a string`, `struct MemcachedSpec`. */
  get expecting() {
    return this.expectingOverride ?? 'a value';
  }

  /** The OpenAPI schema of this type alone (without description and default). */
  ownSchema() {
    return {};
  }

  /** The OpenAPI schema, as kube writes it into a CRD. */
  schema() {
    const schema = this.ownSchema();
    if (this.description !== undefined) schema.description = this.description;
    if (this.hasDefault) schema.default = copy(this.default);
    return schema;
  }

  /**
   * `value` decoded, or a `DecodeError` naming `path`.
   * @param {any} value
   * @param {string | undefined} source how a number was written (see `numberSource`)
   * @param {(string|number)[]} path
   */
  decode(value, source, path) {
    return value;
  }

  /**
   * The first declared bound `value` (decoded) breaks, as `[path, message]`, or undefined.
   * @param {any} value
   * @param {string} path
   */
  check(value, path) {
    return undefined;
  }
}

/** Adds the bounds checks shared by integers and numbers. */
function checkRange(value, min, max) {
  const below = min !== undefined && value < min;
  const above = max !== undefined && value > max;
  if (!below && !above) return undefined;
  if (min !== undefined && max !== undefined) return `must be between ${min} and ${max}, got ${value}`;
  return below ? `must be at least ${min}, got ${value}` : `must be at most ${max}, got ${value}`;
}

class IntegerType extends Type {
  constructor(options = {}) {
    super(options);
    this.format = options.format ?? 'int64';
    if (!['int32', 'int64'].includes(this.format)) throw new TypeError(`integer format ${this.format}: int32 or int64`);
    this.minimum = options.minimum;
    this.maximum = options.maximum;
    this.bits = this.format === 'int32' ? 32n : 64n;
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return this.format === 'int32' ? 'i32' : 'i64';
  }
  ownSchema() {
    const schema = { type: 'integer', format: this.format };
    // k8s-openapi's JSONSchemaProps holds bounds as f64: serde_json writes `100.0`.
    if (this.minimum !== undefined) schema.minimum = new JsonFloat(this.minimum);
    if (this.maximum !== undefined) schema.maximum = new JsonFloat(this.maximum);
    return schema;
  }
  decode(value, source, path) {
    if (typeof value !== 'number') throw invalidType(path, value, source, this.expecting);
    const read = readNumber(value, source);
    if (!('integer' in read)) throw invalidType(path, value, source, this.expecting);
    const limit = 1n << (this.bits - 1n);
    if (read.integer < -limit || read.integer >= limit) {
      throw new DecodeError(path, `invalid value: integer \`${read.integer}\`, expected ${this.expecting}`);
    }
    // An i64 beyond 2^53 stays a BigInt so that no digit is lost.
    return Number.isSafeInteger(Number(read.integer)) ? Number(read.integer) : read.integer;
  }
  check(value, path) {
    const why = checkRange(value, this.minimum, this.maximum);
    return why && [path, why];
  }
}

class NumberType extends Type {
  constructor(options = {}) {
    super(options);
    this.format = options.format ?? 'double';
    this.minimum = options.minimum;
    this.maximum = options.maximum;
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return this.format === 'float' ? 'f32' : 'f64';
  }
  ownSchema() {
    const schema = { type: 'number', format: this.format };
    if (this.minimum !== undefined) schema.minimum = new JsonFloat(this.minimum);
    if (this.maximum !== undefined) schema.maximum = new JsonFloat(this.maximum);
    return schema;
  }
  decode(value, source, path) {
    if (typeof value !== 'number') throw invalidType(path, value, source, this.expecting);
    return value;
  }
  check(value, path) {
    const why = checkRange(value, this.minimum, this.maximum);
    return why && [path, why];
  }
}

class StringType extends Type {
  constructor(options = {}) {
    super(options);
    this.format = options.format;
    this.minLength = options.minLength;
    this.maxLength = options.maxLength;
    this.pattern = options.pattern;
    this.enum = options.enum;
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return 'a string';
  }
  ownSchema() {
    const schema = { type: 'string' };
    if (this.format !== undefined) schema.format = this.format;
    if (this.minLength !== undefined) schema.minLength = this.minLength;
    if (this.maxLength !== undefined) schema.maxLength = this.maxLength;
    if (this.pattern !== undefined) schema.pattern = this.pattern;
    if (this.enum !== undefined) schema.enum = [...this.enum];
    return schema;
  }
  decode(value, source, path) {
    if (typeof value !== 'string') throw invalidType(path, value, source, this.expecting);
    if (this.enum !== undefined && !this.enum.includes(value)) {
      // As serde reports a unit enum's unknown variant.
      const expected = this.enum.map((v) => `\`${v}\``);
      const list = expected.length === 1 ? expected[0] : `one of ${expected.join(', ')}`;
      throw new DecodeError(path, `unknown variant \`${value}\`, expected ${list}`);
    }
    return value;
  }
  check(value, path) {
    // Lengths in characters, as the API server counts them.
    const length = [...value].length;
    if (this.minLength !== undefined && length < this.minLength) {
      return [path, `must be at least ${this.minLength} characters long, got ${rustDebugString(value)}`];
    }
    if (this.maxLength !== undefined && length > this.maxLength) {
      return [path, `must be at most ${this.maxLength} characters long, got ${rustDebugString(value)}`];
    }
    if (this.pattern !== undefined && !new RegExp(this.pattern, 'u').test(value)) {
      return [path, `must match ${rustDebugString(this.pattern)}, got ${rustDebugString(value)}`];
    }
    return undefined;
  }
}

class BooleanType extends Type {
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return 'a boolean';
  }
  ownSchema() {
    return { type: 'boolean' };
  }
  decode(value, source, path) {
    if (typeof value !== 'boolean') throw invalidType(path, value, source, this.expecting);
    return value;
  }
}

class ArrayType extends Type {
  constructor(items, options = {}) {
    super(options);
    this.items = items;
    this.minItems = options.minItems;
    this.maxItems = options.maxItems;
    this.extensions = options.extensions ?? {};
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return 'a sequence';
  }
  ownSchema() {
    const schema = { type: 'array', items: this.items.schema(), ...copy(this.extensions) };
    if (this.minItems !== undefined) schema.minItems = this.minItems;
    if (this.maxItems !== undefined) schema.maxItems = this.maxItems;
    return schema;
  }
  decode(value, source, path) {
    if (!Array.isArray(value)) throw invalidType(path, value, source, this.expecting);
    return value.map((item, i) => this.items.decode(item, numberSource(value, i), [...path, i]));
  }
  check(value, path) {
    if (this.minItems !== undefined && value.length < this.minItems) {
      return [path, `must have at least ${this.minItems} items, got ${value.length}`];
    }
    if (this.maxItems !== undefined && value.length > this.maxItems) {
      return [path, `must have at most ${this.maxItems} items, got ${value.length}`];
    }
    for (let i = 0; i < value.length; i++) {
      const found = this.items.check(value[i], fieldPath(path, i, 'index'));
      if (found) return found;
    }
    return undefined;
  }
}

class MapType extends Type {
  constructor(values, options = {}) {
    super(options);
    this.values = values;
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return 'a map';
  }
  ownSchema() {
    return { type: 'object', additionalProperties: this.values.schema() };
  }
  decode(value, source, path) {
    if (!isObject(value)) throw invalidType(path, value, source, this.expecting);
    const out = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = this.values.decode(item, numberSource(value, key), [...path, key]);
    }
    return out;
  }
  check(value, path) {
    for (const [key, item] of Object.entries(value)) {
      const found = this.values.check(item, fieldPath(path, key, 'key'));
      if (found) return found;
    }
    return undefined;
  }
}

class OptionalType extends Type {
  constructor(inner) {
    super({ description: inner.description });
    this.inner = inner;
    this.optional = true;
  }
  get expecting() {
    return this.inner.expecting;
  }
  schema() {
    // kube marks an `Option` nullable; an optional field is never required.
    return { ...this.inner.schema(), nullable: true };
  }
  decode(value, source, path) {
    return value === null || value === undefined ? undefined : this.inner.decode(value, source, path);
  }
  check(value, path) {
    return value === undefined ? undefined : this.inner.check(value, path);
  }
}

class ObjectType extends Type {
  constructor(properties, options = {}) {
    super(options);
    this.properties = properties;
    this.required = options.required ?? [];
    this.name = options.name;
    for (const name of this.required) {
      if (!Object.hasOwn(properties, name)) throw new TypeError(`required field ${name} is not a property`);
    }
    for (const [name, type] of Object.entries(properties)) {
      if (!(type instanceof Type)) throw new TypeError(`property ${name} is not a schema type`);
    }
  }
  /** The same object with a struct name for messages (`expected struct MemcachedSpec`). */
  named(name) {
    const named = Object.create(Object.getPrototypeOf(this));
    Object.assign(named, this, { name });
    return named;
  }
  get expecting() {
    if (this.expectingOverride !== undefined) return this.expectingOverride;
    return this.name !== undefined ? `struct ${this.name}` : 'a map';
  }
  ownSchema() {
    const properties = {};
    for (const [name, type] of Object.entries(this.properties)) properties[name] = type.schema();
    const schema = { type: 'object', properties };
    // The Rust SDK's CRD lists required fields sorted.
    if (this.required.length > 0) schema.required = [...this.required].sort();
    return schema;
  }
  decode(value, source, path) {
    // A struct serde derives also reads a list of its fields' values, in declaration order.
    if (Array.isArray(value) && this.name !== undefined && this.expectingOverride === undefined) {
      return this.decodeSeq(value, path);
    }
    if (!isObject(value)) throw invalidType(path, value, source, this.expecting);
    const out = {};
    // serde visits fields in the order of the input, then reports missing ones.
    for (const [key, item] of Object.entries(value)) {
      const type = this.properties[key];
      if (type === undefined || !Object.hasOwn(this.properties, key)) continue;
      const decoded = type.decode(item, numberSource(value, key), [...path, key]);
      if (decoded !== undefined) out[key] = decoded;
    }
    for (const [key, type] of Object.entries(this.properties)) {
      if (Object.hasOwn(value, key)) continue;
      if (this.required.includes(key)) throw new DecodeError(path, `missing field \`${key}\``);
      if (type.hasDefault) out[key] = copy(type.default);
    }
    return out;
  }
  decodeSeq(value, path) {
    const fields = Object.entries(this.properties);
    const out = {};
    for (const [i, [key, type]] of fields.entries()) {
      if (i < value.length) {
        const decoded = type.decode(value[i], numberSource(value, i), [...path, i]);
        if (decoded !== undefined) out[key] = decoded;
      } else if (type.hasDefault) {
        out[key] = copy(type.default);
      } else if (!type.optional || type.seqDefault === false) {
        throw new DecodeError(path, `invalid length ${i}, expected struct ${this.name} with ${fields.length} elements`);
      }
    }
    if (value.length > fields.length) {
      throw new DecodeError(path, `invalid length ${value.length}, expected fewer elements in array`);
    }
    return out;
  }
  check(value, path) {
    for (const [key, type] of Object.entries(this.properties)) {
      if (value[key] === undefined) continue;
      const found = type.check(value[key], fieldPath(path, key, 'field'));
      if (found) return found;
    }
    return undefined;
  }
}

/** A schema given as raw OpenAPI, decoded by `decode` (by default taken as it is). */
class RawType extends Type {
  constructor(schema, options = {}) {
    super(options);
    this.raw = schema;
    this.decoder = options.decode;
  }
  ownSchema() {
    const schema = copy(this.raw);
    delete schema.description;
    return schema;
  }
  schema() {
    const schema = copy(this.raw);
    if (this.description !== undefined) schema.description = this.description;
    if (this.hasDefault) schema.default = copy(this.default);
    return schema;
  }
  decode(value, source, path) {
    return this.decoder ? this.decoder(value, source, path) : value;
  }
}

/** k8s-openapi's Quantity: a string, or a number written as Rust writes it. */
function decodeQuantity(value, source, path) {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') {
    const read = readNumber(value, source);
    return 'integer' in read ? String(read.integer) : rustFloatDisplay(read.float);
  }
  throw invalidType(path, value, source, 'Quantity');
}

const quantityMap = new MapType(new RawType(QUANTITY, { decode: decodeQuantity, expecting: 'Quantity' }));
// k8s-openapi reads a missing or null required field as its default ("" for a name).
const resourceClaim = new ObjectType(
  { name: new OptionalType(new StringType()), request: new OptionalType(new StringType()) },
  { expecting: 'ResourceClaim' },
);
const resourceRequirements = new ObjectType(
  {
    claims: new OptionalType(new ArrayType(resourceClaim)),
    limits: new OptionalType(quantityMap),
    requests: new OptionalType(quantityMap),
  },
  { expecting: 'ResourceRequirements' },
);

/** The schema builder. */
export const t = {
  /**
   * An integer: `format` `int32` (decoded as Rust's i32) or `int64` (the default).
   * @param {{format?: 'int32'|'int64', minimum?: number, maximum?: number, default?: number, description?: string}} [options]
   */
  integer: (options) => new IntegerType(options),
  /**
   * A floating-point number (f64, or f32 with `format: 'float'`).
   * @param {{format?: 'double'|'float', minimum?: number, maximum?: number, default?: number, description?: string}} [options]
   */
  number: (options) => new NumberType(options),
  /**
   * A string.
   * @param {{default?: string, description?: string, format?: string, minLength?: number, maxLength?: number, pattern?: string, enum?: string[]}} [options]
   */
  string: (options) => new StringType(options),
  /** A boolean. @param {{default?: boolean, description?: string}} [options] */
  boolean: (options) => new BooleanType(options),
  /**
   * A list of `items`.
   * @param {Type} items
   * @param {{default?: any[], description?: string, minItems?: number, maxItems?: number, extensions?: object}} [options]
   */
  array: (items, options) => new ArrayType(items, options),
  /**
   * A map from strings to `values`.
   * @param {Type} values
   * @param {{default?: object, description?: string}} [options]
   */
  map: (values, options) => new MapType(values, options),
  /**
   * An object of the given properties. Fields listed in `required` must be present; others
   * take their `default`, or are absent (wrap them in `t.optional` to mark them nullable).
   * @param {Record<string, Type>} properties
   * @param {{required?: string[], name?: string, description?: string, default?: object}} [options]
   */
  object: (properties, options) => new ObjectType(properties, options),
  /**
   * A field that may be absent or null (Rust's `Option`): nullable in the schema, absent
   * from the decoded object.
   * @param {Type} type
   */
  optional: (type) => new OptionalType(type),
  /**
   * A raw OpenAPI schema (e.g. of a Kubernetes type), with an optional decoder.
   * @param {object} schema
   * @param {{decode?: (value: any, source: string|undefined, path: (string|number)[]) => any, expecting?: string, description?: string, default?: any}} [options]
   */
  ref: (schema, options) => new RawType(schema, options),
  /**
   * A container's compute resources (`core/v1` ResourceRequirements), decoded as k8s-openapi
   * does (numbers in quantities become strings). Check them with `validateContainerResources`.
   * @param {{description?: string}} [options]
   */
  resources: (options = {}) =>
    new RawType(RESOURCE_REQUIREMENTS, {
      ...options,
      expecting: 'ResourceRequirements',
      decode: (value, source, path) => resourceRequirements.decode(value, source, path),
    }),
};

/** The properties of the `Condition` the SDK's `conditions` field decodes. */
const conditionType = new ObjectType(
  {
    type: new StringType(),
    status: new StringType(),
    reason: new StringType(),
    message: new StringType(),
    observedGeneration: new OptionalType(new IntegerType({ format: 'int64' })),
    lastTransitionTime: new OptionalType(new StringType()),
  },
  { required: ['type', 'status', 'reason', 'message'], name: 'Condition' },
);

/** The CRD schema of a list of conditions, as Kubernetes declares them: a map keyed by `type`. */
export const CONDITIONS_SCHEMA = {
  type: 'array',
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
  items: {
    type: 'object',
    required: ['status', 'type'],
    properties: {
      type: { type: 'string' },
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      reason: { type: 'string' },
      message: { type: 'string' },
      observedGeneration: { type: 'integer', format: 'int64' },
      lastTransitionTime: { type: 'string', format: 'date-time' },
    },
  },
};

/**
 * A status field holding `Condition`s: declared as Kubernetes lists of conditions are, and
 * decoded as the Rust SDK's `Vec<Condition>` (type, status, reason and message required).
 * @param {{description?: string, default?: any[]}} [options]
 */
t.conditions = (options = {}) =>
  new RawType(CONDITIONS_SCHEMA, {
    ...options,
    expecting: 'a sequence',
    decode: (value, source, path) => new ArrayType(conditionType).decode(value, source, path),
  });
