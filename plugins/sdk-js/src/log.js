// Logging through the host's `host-log` import (in Node, to stderr, so unit tests show it).

/** @type {(level: string, message: string) => void} */
let emit = (level, message) => {
  // Node (tests): the same shape as the Rust SDK's native fallback.
  console.error(`[${level[0].toUpperCase()}${level.slice(1)}] ${message}`);
};

/**
 * Routes the SDK's logging to the host; the build's generated entry module calls it with the
 * component's `host-log` import (a module that only exists inside the component).
 * @param {(level: string, message: string) => void} log
 */
export function setHostLog(log) {
  emit = log;
}

/** @param {string} message */
export function trace(message) {
  emit('trace', String(message));
}
/** @param {string} message */
export function debug(message) {
  emit('debug', String(message));
}
/** @param {string} message */
export function info(message) {
  emit('info', String(message));
}
/** @param {string} message */
export function warn(message) {
  emit('warn', String(message));
}
/** @param {string} message */
export function error(message) {
  emit('error', String(message));
}
