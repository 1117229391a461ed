// The contract's canonical ABI, by hand: the core exports and import of
// operator-host:reconciler@0.3.0 that `operator-host componentize` wraps into a component.
//
// Layouts follow the component model's canonical ABI: a record's fields at their alignment
// (strings and lists are (pointer, length) pairs of 8 bytes, aligned to 4), an enum, a
// variant's or an option's case and a flags value as one byte, a variant's payload at the
// alignment of its widest case. A function whose flat results are more than one value returns
// the address of a return area; flat parameters are at most 16 here, so all are passed flat.

//go:build wasip1

package operatorhost

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unsafe"
)

// adapterArenaSize is how much the WASI preview1 adapter may allocate (its stack and state)
// before Go's runtime has started; it asks for a little over 64 KiB.
const adapterArenaSize = 256 << 10

// adapterArena is that memory. The adapter allocates while Go's _initialize runs (Go's runtime
// calls WASI to start), when no Go function can be called yet, so `operator-host
// componentize` gives it an allocator of its own: it finds this array by the marker it starts
// with (the size follows the marker) and bump-allocates from it. Initialised data, so that
// the marker is in the module's data section; the runtime overwrites it.
var adapterArena = [adapterArenaSize]byte{
	'o', 'p', 'e', 'r', 'a', 't', 'o', 'r', '-', 'h', 'o', 's', 't', ':',
	'a', 'd', 'a', 'p', 't', 'e', 'r', '-', 'a', 'r', 'e', 'n', 'a', ':',
	'2', '6', '2', '1', '4', '4', ';',
}

// allocations are the blocks the host asked for (to write the call's arguments into), kept
// alive until the call has read them; results are what the last call returned, kept until its
// post-return.
var (
	allocations = map[uint32][]uint64{}
	results     [][]uint64
	// returnArea holds a call's result: plugin-info's 84 bytes are the most.
	returnArea [11]uint64
)

// alloc is a block of size bytes, aligned to align (at most 8: a []uint64's elements are), and
// its address; it lives as long as the caller keeps the block.
func alloc(size, align uint32) ([]uint64, uint32) {
	if align > 8 {
		panic(fmt.Sprintf("cabi_realloc: alignment %d is more than 8", align))
	}
	block := make([]uint64, (size+7)/8)
	return block, uint32(uintptr(unsafe.Pointer(&block[0])))
}

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	if newSize == 0 {
		return align
	}
	block, address := alloc(newSize, align)
	if old != 0 {
		copy(bytesAt(address, min(oldSize, newSize)), bytesAt(old, min(oldSize, newSize)))
		delete(allocations, old)
	}
	allocations[address] = block
	return address
}

//go:wasmexport operator_host_adapter_arena
func adapterArenaAddress() uint32 {
	// Never called: it keeps the arena in the binary (the linker drops unreferenced data).
	return uint32(uintptr(unsafe.Pointer(&adapterArena[0])))
}

func bytesAt(address, length uint32) []byte {
	if length == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(address))), length)
}

// takeString reads an argument string and releases its block.
func takeString(address, length uint32) string {
	s := string(bytesAt(address, length))
	delete(allocations, address)
	return s
}

// takeOptionalString reads an option<string> argument (flattened as its case, then the
// string) and releases its block.
func takeOptionalString(present, address, length uint32) *string {
	if present == 0 {
		return nil
	}
	s := takeString(address, length)
	return &s
}

// takeStrings reads a list<string> argument and releases its blocks.
func takeStrings(address, count uint32) []string {
	list := make([]string, count)
	elements := bytesAt(address, count*8)
	for i := range list {
		list[i] = takeString(binary.LittleEndian.Uint32(elements[i*8:]), binary.LittleEndian.Uint32(elements[i*8+4:]))
	}
	delete(allocations, address)
	return list
}

// takeRelated reads a list<related-objects> argument (16 bytes each: the name, then the
// list<string> of objects) and releases its blocks.
func takeRelated(address, count uint32) []RelatedObjects {
	list := make([]RelatedObjects, count)
	elements := bytesAt(address, count*16)
	for i := range list {
		at := i * 16
		list[i] = RelatedObjects{
			Name:    takeString(binary.LittleEndian.Uint32(elements[at:]), binary.LittleEndian.Uint32(elements[at+4:])),
			Objects: takeStrings(binary.LittleEndian.Uint32(elements[at+8:]), binary.LittleEndian.Uint32(elements[at+12:])),
		}
	}
	delete(allocations, address)
	return list
}

// result is an area of n bytes that stays alive until the post-return of this call. An empty
// one is a dangling, aligned address, as the canonical ABI allows for an empty list.
func result(n uint32) ([]byte, uint32) {
	if n == 0 {
		return nil, 8
	}
	block, address := alloc(n, 8)
	results = append(results, block)
	return bytesAt(address, n), address
}

// putString writes s into memory that lives until post-return, and its (pointer, length)
// at area[at:].
func putString(area []byte, at int, s string) {
	if s == "" {
		binary.LittleEndian.PutUint32(area[at:], 1)
		binary.LittleEndian.PutUint32(area[at+4:], 0)
		return
	}
	bytes, address := result(uint32(len(s)))
	copy(bytes, s)
	binary.LittleEndian.PutUint32(area[at:], address)
	binary.LittleEndian.PutUint32(area[at+4:], uint32(len(s)))
}

// putList writes a list of count elements of size bytes each, written by put at their offset.
func putList(area []byte, at int, count, size int, put func(elements []byte, index, at int)) {
	elements, address := result(uint32(count * size))
	for i := range count {
		put(elements, i, i*size)
	}
	binary.LittleEndian.PutUint32(area[at:], address)
	binary.LittleEndian.PutUint32(area[at+4:], uint32(count))
}

// putStrings writes a list<string>.
func putStrings(area []byte, at int, list []string) {
	putList(area, at, len(list), 8, func(elements []byte, i, at int) { putString(elements, at, list[i]) })
}

// putOptionalString writes an option<string> (12 bytes: the case, then the string at 4).
func putOptionalString(area []byte, at int, value json.RawMessage) {
	if value == nil {
		area[at] = 0
		return
	}
	area[at] = 1
	putString(area, at+4, string(value))
}

// putGVK writes a group-version-kind record (36 bytes: four strings and a bool).
func putGVK(area []byte, at int, k GroupVersionKind) {
	putString(area, at, k.Group)
	putString(area, at+8, k.Version)
	putString(area, at+16, k.Kind)
	putString(area, at+24, k.Plural)
	area[at+32] = boolByte(k.Namespaced)
}

// relatedResourceSize is a related-resource record's: name 0, kind 8 (36 bytes), selector 44
// (a variant: the case, then its string at 4), secret-view 56; 57 rounded up to 4.
const relatedResourceSize = 60

// putRelatedResource writes a related-resource record.
func putRelatedResource(area []byte, at int, related Related) {
	putString(area, at, related.Name)
	putGVK(area, at+8, gvk(related.Kind))
	area[at+44] = byte(related.Selector.Type)
	putString(area, at+48, related.Selector.Value)
	// The contract's secret-view lists full first; the SDK's zero value is the safe data-hash.
	view := byte(1)
	if related.SecretView == SecretFull {
		view = 0
	}
	area[at+56] = view
}

// childSize is a child record's: object 0, update 8, on-prune 9, ready-when 12 (an
// option<readiness>: the case, then the readiness variant at 16: its case, then at 20 a
// condition's string or a field-value's path and value).
const childSize = 36

// putChild writes a child record.
func putChild(area []byte, at int, child ResponseChild) {
	putString(area, at, child.Object)
	area[at+8] = byte(child.Options.Update)
	area[at+9] = byte(child.Options.OnPrune)
	readiness := child.Options.ReadyWhen
	if readiness == nil {
		area[at+12] = 0
		return
	}
	area[at+12] = 1
	if readiness.Condition != "" {
		area[at+16] = 0
		putString(area, at+20, readiness.Condition)
		return
	}
	area[at+16] = 1
	putString(area, at+20, readiness.Path)
	putString(area, at+28, readiness.Value)
}

// fieldErrorSize is a field-error record's: reason 0, field 4, value 12 (an option<string>),
// detail 24.
const fieldErrorSize = 32

func putFieldError(area []byte, at int, err FieldError) {
	area[at] = byte(err.Reason)
	putString(area, at+4, err.Field)
	putOptionalString(area, at+12, err.Value)
	putString(area, at+24, err.Detail)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// putOptionU64 writes an option<u64> (16 bytes: the case, then the value at 8).
func putOptionU64(area []byte, at int, value *uint64) {
	if value == nil {
		area[at] = 0
		return
	}
	area[at] = 1
	binary.LittleEndian.PutUint64(area[at+8:], *value)
}

// returnBytes is the return area, cleared.
func returnBytes() ([]byte, uint32) {
	returnArea = [len(returnArea)]uint64{}
	return unsafe.Slice((*byte)(unsafe.Pointer(&returnArea[0])), len(returnArea)*8),
		uint32(uintptr(unsafe.Pointer(&returnArea[0])))
}

func mustBeRegistered() handler {
	if registered == nil {
		panic("no plugin registered: call operatorhost.Register from an init function")
	}
	return registered
}

// guarded runs call, logging a panic through the host before it traps (the host reports the
// trap, as it does a Rust plugin's panic).
func guarded[T any](call func() T) T {
	defer func() {
		if recovered := recover(); recovered != nil {
			Error(fmt.Sprintf("the plugin panicked: %v", recovered))
			panic(recovered)
		}
	}()
	return call()
}

//go:wasmexport operator-host:reconciler/plugin@0.3.0#info
func exportInfo() uint32 {
	return guarded(func() uint32 {
		info, err := mustBeRegistered().info()
		if err != nil {
			panic(fmt.Sprintf("the plugin's declaration is invalid: %v", err))
		}
		area, address := returnBytes()
		// plugin-info: name 0, version 8, parent 16 (36 bytes), children 52, needs-finalize
		// 60, crd 64, related 72, implements 80 (flags: one byte).
		putString(area, 0, info.Name)
		putString(area, 8, info.Version)
		putGVK(area, 16, info.Parent)
		putList(area, 52, len(info.Children), 36, func(elements []byte, i, at int) { putGVK(elements, at, info.Children[i]) })
		area[60] = boolByte(info.NeedsFinalize)
		putString(area, 64, info.CRD)
		putList(area, 72, len(info.Related), relatedResourceSize, func(elements []byte, i, at int) {
			putRelatedResource(elements, at, info.Related[i])
		})
		area[80] = byte(info.Implements)
		return address
	})
}

// putError writes the err case of a result<_, reconcile-error>: the variant at 8, its
// string at 12.
func putError(area []byte, err error) {
	invalidSpec, message := contractError(err)
	area[0] = 1
	area[8] = 1 - boolByte(invalidSpec)
	putString(area, 12, message)
}

// takeRequest reads a reconcile-request, flattened: the parent, the observed children, the
// related objects.
func takeRequest(parent, parentLength, observed, observedCount, related, relatedCount uint32) Request {
	return Request{
		Parent:   takeString(parent, parentLength),
		Observed: takeStrings(observed, observedCount),
		Related:  takeRelated(related, relatedCount),
	}
}

//go:wasmexport operator-host:reconciler/plugin@0.3.0#reconcile
func exportReconcile(parent, parentLength, observed, observedCount, related, relatedCount uint32) uint32 {
	request := takeRequest(parent, parentLength, observed, observedCount, related, relatedCount)
	return guarded(func() uint32 {
		response, err := mustBeRegistered().reconcile(request)
		area, address := returnBytes()
		if err != nil {
			putError(area, err)
			return address
		}
		// result<reconcile-response, _>: the case at 0, the response at 8 (children 8,
		// status 16, requeue-after-ms 24).
		putList(area, 8, len(response.Children), childSize, func(elements []byte, i, at int) {
			putChild(elements, at, response.Children[i])
		})
		putString(area, 16, response.Status)
		putOptionU64(area, 24, response.RequeueAfterMs)
		return address
	})
}

//go:wasmexport operator-host:reconciler/plugin@0.3.0#finalize
func exportFinalize(parent, parentLength, observed, observedCount, related, relatedCount uint32) uint32 {
	request := takeRequest(parent, parentLength, observed, observedCount, related, relatedCount)
	return guarded(func() uint32 {
		finalized, err := mustBeRegistered().finalize(request)
		area, address := returnBytes()
		if err != nil {
			putError(area, err)
			return address
		}
		// result<finalize-response, _>: done at 8, requeue-after-ms at 16.
		area[8] = boolByte(finalized.Done)
		if !finalized.Done {
			putOptionU64(area, 16, &finalized.RequeueAfterMs)
		}
		return address
	})
}

// exportValidate takes an admission-request flattened: the operation, the object and the old
// object (each an option<string>: case, address, length), the user, dry-run.
//
//go:wasmexport operator-host:reconciler/plugin@0.3.0#validate
func exportValidate(operation, objectPresent, object, objectLength, oldPresent, old, oldLength, user, userLength, dryRun uint32) uint32 {
	request := AdmissionRequest{
		Operation: Operation(operation),
		Object:    takeOptionalString(objectPresent, object, objectLength),
		OldObject: takeOptionalString(oldPresent, old, oldLength),
		User:      takeString(user, userLength),
		DryRun:    dryRun != 0,
	}
	return guarded(func() uint32 {
		validation := mustBeRegistered().validate(request)
		area, address := returnBytes()
		// validation: errors 0, warnings 8.
		errors := validation.Errors()
		putList(area, 0, len(errors), fieldErrorSize, func(elements []byte, i, at int) { putFieldError(elements, at, errors[i]) })
		putStrings(area, 8, validation.Warnings())
		return address
	})
}

// putStringResult writes a result<string, string>: the case at 0, the string at 4.
func putStringResult(text string, err error) uint32 {
	area, address := returnBytes()
	if err != nil {
		area[0] = 1
		text = err.Error()
	}
	putString(area, 4, text)
	return address
}

//go:wasmexport operator-host:reconciler/plugin@0.3.0#default
func exportDefault(object, objectLength uint32) uint32 {
	text := takeString(object, objectLength)
	return guarded(func() uint32 {
		return putStringResult(mustBeRegistered().defaultObject(text))
	})
}

//go:wasmexport operator-host:reconciler/plugin@0.3.0#convert
func exportConvert(object, objectLength, toVersion, toVersionLength uint32) uint32 {
	text, version := takeString(object, objectLength), takeString(toVersion, toVersionLength)
	return guarded(func() uint32 {
		return putStringResult(mustBeRegistered().convert(text, version))
	})
}

// The post-returns release what a call returned, once the host has copied it out.

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#info
func postInfo(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#reconcile
func postReconcile(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#finalize
func postFinalize(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#validate
func postValidate(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#default
func postDefault(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.3.0#convert
func postConvert(uint32) { results = nil }

//go:wasmimport operator-host:reconciler/host-log@0.3.0 log
func hostLog(level uint32, message unsafe.Pointer, length uint32)

func logAt(level logLevel, message string) {
	if message == "" {
		return
	}
	bytes := []byte(message)
	hostLog(uint32(level), unsafe.Pointer(&bytes[0]), uint32(len(bytes)))
}
