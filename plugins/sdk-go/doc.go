// Package operatorhost writes operator-host reconciler plugins in Go: the Rust SDK's
// counterpart for Go's own toolchain (GOOS=wasip1, //go:wasmexport), componentised by
// `operator-host componentize`.
//
// JSON values are Go's own: objects are map[string]any, arrays []any, numbers json.Number
// when they were read and any Go number when a plugin makes them. A plugin returns its
// children as such values (or any Go value encoding/json accepts), and the SDK writes them as
// the Rust SDK does (canonical JSON, maps sorted by key), so that hashes and goldens agree.
package operatorhost
