//! Files written whole: a temporary file beside the target, renamed into place, so a reader
//! (a host watching its plugin directory, another process reading the cache) never sees half
//! of one.

use std::path::Path;

/// Writes `bytes` to `path` whole, creating its directory.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
