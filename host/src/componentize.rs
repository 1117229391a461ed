//! `operator-host componentize`: a WASI preview1 core module that exports the contract's
//! functions (Go's `GOOS=wasip1 -buildmode=c-shared` with the Go SDK) made into a plugin
//! component, with the contract's WIT and the preview1 adapter this host's wasmtime ships.
//!
//! The contract is the one the module's exports name (`operator-host:reconciler/plugin@0.3.0#reconcile`
//! for today's Go SDK, `@0.1.0` for a module built with an older one), so that a plugin built
//! with an old SDK release is componentized as what it is rather than refused.
//!
//! Go's runtime cannot be called before its `_initialize` has run, and that is when the
//! adapter first allocates (Go starts by calling WASI). The Go SDK reserves an arena for it in
//! its data, marked with [`ARENA_MARKER`] and its size; this module gives the adapter an
//! allocator of its own over that arena (`cabi_realloc_adapter`, which the adapter prefers to
//! the module's `cabi_realloc`), so that no Go function runs before Go has started.

use std::path::{Path, PathBuf};

use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

/// A contract a module can be componentized with: its version and its WIT.
struct Contract {
    version: &'static str,
    wit: &'static str,
}

/// The contracts the Go SDK has built, newest first: 0.3.0 (today's SDK) and 0.1.0 (its
/// releases before 0.3.0; no Go SDK built 0.2.0).
const CONTRACTS: [Contract; 2] = [
    Contract {
        version: "0.3.0",
        wit: include_str!("../../wit/reconciler.wit"),
    },
    Contract {
        version: "0.1.0",
        wit: include_str!("../../wit/0.1.0/reconciler.wit"),
    },
];
/// The contract's world.
const WORLD: &str = "reconciler";
/// What the adapter's arena starts with, followed by its size in bytes and `;`.
pub const ARENA_MARKER: &[u8] = b"operator-host:adapter-arena:";
/// The export the adapter allocates with when the module has it.
const ADAPTER_REALLOC: &str = "cabi_realloc_adapter";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a WebAssembly core module ({reason}); componentize takes what `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` writes",
        path.display()
    )]
    NotACoreModule { path: PathBuf, reason: String },
    #[error("{}: {reason}", path.display())]
    Arena { path: PathBuf, reason: String },
    #[error("adding the adapter's allocator to {}: {source}", path.display())]
    AddAllocator {
        path: PathBuf,
        source: anyhow::Error,
    },
    #[error(
        "{} exports no contract componentize can encode: expected the export {} (contracts {})",
        path.display(),
        expected_exports(),
        supported_versions()
    )]
    NoContract { path: PathBuf },
    #[error("{}: cannot be made a component of operator-host:reconciler@{version}: {source:#}", path.display())]
    Encode {
        path: PathBuf,
        version: &'static str,
        source: anyhow::Error,
    },
}

/// Reads the core module at `input` and returns it as a component of the contract.
pub fn componentize(input: &Path) -> Result<Vec<u8>, Error> {
    let module = std::fs::read(input).map_err(|source| Error::Read {
        path: input.to_path_buf(),
        source,
    })?;
    let not_core = |reason: String| Error::NotACoreModule {
        path: input.to_path_buf(),
        reason,
    };
    match wasmparser::Parser::new(0).parse(&module, true) {
        Ok(wasmparser::Chunk::Parsed {
            payload:
                wasmparser::Payload::Version {
                    encoding: wasmparser::Encoding::Module,
                    ..
                },
            ..
        }) => {}
        Ok(wasmparser::Chunk::Parsed {
            payload: wasmparser::Payload::Version { .. },
            ..
        }) => return Err(not_core("it is a component already".into())),
        Ok(_) => return Err(not_core("no WebAssembly header".into())),
        Err(error) => return Err(not_core(error.message().to_string())),
    }
    let arena = find_arena(&module).map_err(|reason| Error::Arena {
        path: input.to_path_buf(),
        reason,
    })?;
    let mut module = match arena {
        Some((start, size)) => {
            with_adapter_allocator(&module, start, size).map_err(|source| Error::AddAllocator {
                path: input.to_path_buf(),
                source,
            })?
        }
        None => module,
    };
    let contract = contract_of(&module)
        .map_err(not_core)?
        .ok_or_else(|| Error::NoContract {
            path: input.to_path_buf(),
        })?;
    encode(&mut module, contract).map_err(|source| Error::Encode {
        path: input.to_path_buf(),
        version: contract.version,
        source,
    })
}

/// The export that says a module implements `version` of the contract.
fn reconcile_export(version: &str) -> String {
    format!("operator-host:reconciler/plugin@{version}#reconcile")
}

fn expected_exports() -> String {
    CONTRACTS
        .iter()
        .map(|contract| format!("`{}`", reconcile_export(contract.version)))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn supported_versions() -> String {
    CONTRACTS
        .iter()
        .map(|contract| contract.version)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The contract whose `reconcile` the module exports; `None` when it exports none of them.
fn contract_of(module: &[u8]) -> Result<Option<&'static Contract>, String> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let wasmparser::Payload::ExportSection(exports) =
            payload.map_err(|e| e.message().to_string())?
        else {
            continue;
        };
        let mut names = Vec::new();
        for export in exports {
            names.push(export.map_err(|e| e.message().to_string())?.name);
        }
        return Ok(CONTRACTS.iter().find(|contract| {
            let wanted = reconcile_export(contract.version);
            names.iter().any(|name| *name == wanted)
        }));
    }
    Ok(None)
}

/// `module` with `contract`'s metadata, wrapped with the preview1 reactor adapter.
fn encode(module: &mut Vec<u8>, contract: &Contract) -> anyhow::Result<Vec<u8>> {
    let mut resolve = Resolve::default();
    let package = resolve.push_str("reconciler.wit", contract.wit)?;
    let world = resolve.select_world(&[package], Some(WORLD))?;
    // The core exports carry the classic names (`operator-host:reconciler/plugin@0.3.0#info`).
    wit_component::embed_component_metadata(module, &resolve, world, StringEncoding::UTF8, false)?;
    ComponentEncoder::default()
        .module(module)?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .validate(true)
        .encode()
}

/// The address and size of the adapter's arena, from its marker in an active data segment;
/// `None` when the module has no marker (it exports an allocator the adapter can use at
/// any time, or needs none).
fn find_arena(module: &[u8]) -> Result<Option<(u32, u32)>, String> {
    let mut found = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|e| e.message().to_string())?;
        if let wasmparser::Payload::ExportSection(exports) = &payload {
            for export in exports.clone() {
                if export.map_err(|e| e.message().to_string())?.name == ADAPTER_REALLOC {
                    return Ok(None);
                }
            }
        }
        let wasmparser::Payload::DataSection(segments) = payload else {
            continue;
        };
        for segment in segments {
            let segment = segment.map_err(|e| e.message().to_string())?;
            let wasmparser::DataKind::Active { offset_expr, .. } = segment.kind else {
                continue;
            };
            let mut offset = offset_expr.get_operators_reader();
            let Ok(wasmparser::Operator::I32Const { value: base }) = offset.read() else {
                continue;
            };
            let data = segment.data;
            let mut at = 0;
            while let Some(index) = find(&data[at..], ARENA_MARKER) {
                let marker = at + index;
                let digits = &data[marker + ARENA_MARKER.len()..];
                let end = digits.iter().position(|&b| b == b';').ok_or_else(|| {
                    "the adapter arena's marker has no size (`;` missing)".to_string()
                })?;
                let size: u32 = std::str::from_utf8(&digits[..end])
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| "the adapter arena's size is not a number".to_string())?;
                let start = u32::try_from(i64::from(base) + marker as i64)
                    .map_err(|_| "the adapter arena is outside the memory".to_string())?;
                found.push((start, size));
                at = marker + 1;
            }
        }
    }
    match found.as_slice() {
        [] => Ok(None),
        [arena] => Ok(Some(*arena)),
        _ => Err(format!(
            "the adapter arena's marker is in the data {} times, expected once",
            found.len()
        )),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `module` with `cabi_realloc_adapter`: a bump allocator over `[start, start + size)` that
/// traps when the arena is used up. The adapter only ever asks it for fresh blocks.
fn with_adapter_allocator(module: &[u8], start: u32, size: u32) -> anyhow::Result<Vec<u8>> {
    let text = wasmprinter::print_bytes(module)?;
    let end = text
        .rfind(')')
        .ok_or_else(|| anyhow::anyhow!("the module's text does not end with `)`"))?;
    let limit = u64::from(start) + u64::from(size);
    let allocator = format!(
        r#"
  (global $operator_host_adapter_next (mut i32) (i32.const {start}))
  (func $operator_host_adapter_realloc (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    ;; align the next free byte: (next + align - 1) & -align
    global.get $operator_host_adapter_next
    local.get 2
    i32.add
    i32.const 1
    i32.sub
    i32.const 0
    local.get 2
    i32.sub
    i32.and
    local.set $at
    local.get $at
    i64.extend_i32_u
    local.get 3
    i64.extend_i32_u
    i64.add
    i64.const {limit}
    i64.gt_u
    if
      unreachable
    end
    local.get $at
    local.get 3
    i32.add
    global.set $operator_host_adapter_next
    local.get $at)
  (export "{ADAPTER_REALLOC}" (func $operator_host_adapter_realloc))
"#
    );
    let mut patched = String::with_capacity(text.len() + allocator.len());
    patched.push_str(&text[..end]);
    patched.push_str(&allocator);
    patched.push_str(&text[end..]);
    Ok(wat::parse_str(&patched)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module_with_data(data: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(module (memory 1) (data (i32.const 1024) "{data}"))"#
        ))
        .unwrap()
    }

    #[test]
    fn the_arena_is_found_by_its_marker_at_its_address() {
        let module = module_with_data("xxoperator-host:adapter-arena:4096;");
        assert_eq!(find_arena(&module), Ok(Some((1026, 4096))));
        assert_eq!(find_arena(&module_with_data("nothing here")), Ok(None));
        let twice =
            module_with_data("operator-host:adapter-arena:1;operator-host:adapter-arena:1;");
        assert!(find_arena(&twice).unwrap_err().contains("2 times"));
        let sizeless = module_with_data("operator-host:adapter-arena:12");
        assert!(find_arena(&sizeless).unwrap_err().contains("no size"));
    }

    #[test]
    fn the_adapter_allocator_bumps_aligned_blocks_and_traps_when_full() {
        let module = module_with_data("operator-host:adapter-arena:64;");
        let patched = with_adapter_allocator(&module, 1024, 64).unwrap();
        let engine = wasmtime::Engine::default();
        let compiled = wasmtime::Module::new(&engine, &patched).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &compiled, &[]).unwrap();
        let realloc = instance
            .get_typed_func::<(i32, i32, i32, i32), i32>(&mut store, ADAPTER_REALLOC)
            .unwrap();
        assert_eq!(realloc.call(&mut store, (0, 0, 1, 3)).unwrap(), 1024);
        assert_eq!(realloc.call(&mut store, (0, 0, 8, 16)).unwrap(), 1032);
        assert_eq!(realloc.call(&mut store, (0, 0, 4, 40)).unwrap(), 1048);
        assert!(
            realloc.call(&mut store, (0, 0, 1, 1)).is_err(),
            "past the arena's end"
        );
    }

    #[test]
    fn what_is_not_a_core_module_is_refused_with_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("plugin.wasm");
        std::fs::write(&text, "not wasm").unwrap();
        let error = componentize(&text).unwrap_err().to_string();
        assert!(
            error.contains("is not a WebAssembly core module"),
            "{error}"
        );
        assert!(error.contains("go build -buildmode=c-shared"), "{error}");
    }

    /// A module exporting `name`, as a Go plugin's `//go:wasmexport` does.
    fn module_exporting(name: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(module (func (export "{name}") (param i32 i32 i32 i32 i32 i32) (result i32) i32.const 0))"#
        ))
        .unwrap()
    }

    #[test]
    fn the_contract_is_the_one_the_modules_exports_name() {
        let version = |name: &str| {
            contract_of(&module_exporting(name))
                .unwrap()
                .map(|c| c.version)
        };
        assert_eq!(
            version("operator-host:reconciler/plugin@0.3.0#reconcile"),
            Some("0.3.0")
        );
        assert_eq!(
            version("operator-host:reconciler/plugin@0.1.0#reconcile"),
            Some("0.1.0")
        );
        assert_eq!(
            version("operator-host:reconciler/plugin@0.2.0#reconcile"),
            None
        );
        assert_eq!(version("reconcile"), None);
        assert!(
            CONTRACTS[0]
                .wit
                .contains("package operator-host:reconciler@0.3.0;")
        );
        assert!(
            CONTRACTS[1]
                .wit
                .contains("package operator-host:reconciler@0.1.0;")
        );
    }

    #[test]
    fn a_module_of_no_known_contract_is_refused_naming_the_contracts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.core.wasm");
        std::fs::write(
            &path,
            module_exporting("operator-host:reconciler/plugin@0.2.0#reconcile"),
        )
        .unwrap();
        let error = componentize(&path).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{} exports no contract componentize can encode: expected the export \
                 `operator-host:reconciler/plugin@0.3.0#reconcile` or \
                 `operator-host:reconciler/plugin@0.1.0#reconcile` (contracts 0.3.0, 0.1.0)",
                path.display()
            )
        );
    }
}
