// The contract's canonical ABI, by hand: the core exports and import of
// operator-host:reconciler@0.1.0 that `operator-host componentize` wraps into a component.

//go:build wasip1

package operatorhost

import (
	"encoding/binary"
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
	// returnArea holds a call's flattened result: plugin-info's 72 bytes are the most.
	returnArea [9]uint64
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

// putStrings writes a list<string>.
func putStrings(area []byte, at int, list []string) {
	elements, address := result(uint32(len(list)) * 8)
	for i, s := range list {
		putString(elements, i*8, s)
	}
	binary.LittleEndian.PutUint32(area[at:], address)
	binary.LittleEndian.PutUint32(area[at+4:], uint32(len(list)))
}

// putGVK writes a group-version-kind record (36 bytes: four strings and a bool).
func putGVK(area []byte, at int, k GroupVersionKind) {
	putString(area, at, k.Group)
	putString(area, at+8, k.Version)
	putString(area, at+16, k.Kind)
	putString(area, at+24, k.Plural)
	area[at+32] = boolByte(k.Namespaced)
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
	returnArea = [9]uint64{}
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

//go:wasmexport operator-host:reconciler/plugin@0.1.0#info
func exportInfo() uint32 {
	return guarded(func() uint32 {
		info, err := mustBeRegistered().info()
		if err != nil {
			panic(fmt.Sprintf("the plugin's declaration is invalid: %v", err))
		}
		area, address := returnBytes()
		// plugin-info: name 0, version 8, parent 16 (36 bytes), children 52, needs-finalize
		// 60, crd 64.
		putString(area, 0, info.Name)
		putString(area, 8, info.Version)
		putGVK(area, 16, info.Parent)
		children, childrenAddress := result(uint32(len(info.Children)) * 36)
		for i, child := range info.Children {
			putGVK(children, i*36, child)
		}
		binary.LittleEndian.PutUint32(area[52:], childrenAddress)
		binary.LittleEndian.PutUint32(area[56:], uint32(len(info.Children)))
		area[60] = boolByte(info.NeedsFinalize)
		putString(area, 64, info.CRD)
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

//go:wasmexport operator-host:reconciler/plugin@0.1.0#reconcile
func exportReconcile(parent, parentLength, observed, observedCount uint32) uint32 {
	parentText, observedText := takeString(parent, parentLength), takeStrings(observed, observedCount)
	return guarded(func() uint32 {
		response, err := mustBeRegistered().reconcile(parentText, observedText)
		area, address := returnBytes()
		if err != nil {
			putError(area, err)
			return address
		}
		// result<reconcile-response, _>: the case at 0, the response at 8 (children 8,
		// status 16, requeue-after-ms 24).
		putStrings(area, 8, response.Children)
		putString(area, 16, response.Status)
		putOptionU64(area, 24, response.RequeueAfterMs)
		return address
	})
}

//go:wasmexport operator-host:reconciler/plugin@0.1.0#finalize
func exportFinalize(parent, parentLength, observed, observedCount uint32) uint32 {
	parentText, observedText := takeString(parent, parentLength), takeStrings(observed, observedCount)
	return guarded(func() uint32 {
		finalized, err := mustBeRegistered().finalize(parentText, observedText)
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

// The post-returns release what a call returned, once the host has copied it out.

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.1.0#info
func postInfo(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.1.0#reconcile
func postReconcile(uint32) { results = nil }

//go:wasmexport cabi_post_operator-host:reconciler/plugin@0.1.0#finalize
func postFinalize(uint32) { results = nil }

//go:wasmimport operator-host:reconciler/host-log@0.1.0 log
func hostLog(level uint32, message unsafe.Pointer, length uint32)

func logAt(level logLevel, message string) {
	if message == "" {
		return
	}
	bytes := []byte(message)
	hostLog(uint32(level), unsafe.Pointer(&bytes[0]), uint32(len(bytes)))
}
