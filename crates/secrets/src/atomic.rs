//! Crash-safe replacement of a file: write a private temp file in the same
//! directory, fsync it, rename it over the target, then fsync the directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use rand::RngCore as _;

/// Replace `path` with `bytes` atomically. The new file has mode 0600 on unix.
/// On failure the temp file is removed and `path` is left as it was.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path);
    let tmp = temp_path(dir, path)?;
    let result = write_then_rename(&tmp, path, dir, bytes);
    if result.is_err() {
        // Best effort: after a successful rename the temp path is already gone.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The directory holding `path`; `.` for a bare file name.
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn temp_path(dir: &Path, path: &Path) -> io::Result<PathBuf> {
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path does not name a file"))?;
    let mut suffix = [0u8; 8];
    rand::rngs::OsRng
        .try_fill_bytes(&mut suffix)
        .map_err(io::Error::other)?;
    Ok(dir.join(format!(
        ".{}.{:016x}.tmp",
        file_name.to_string_lossy(),
        u64::from_le_bytes(suffix)
    )))
}

fn write_then_rename(tmp: &Path, path: &Path, dir: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = create_private(tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(tmp, path)?;
    sync_dir(dir)
}

#[cfg(unix)]
fn create_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    // The umask can only clear bits of 0600, but make the result exact.
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_dir_of_bare_and_nested_paths() {
        assert_eq!(parent_dir(Path::new("secrets.toml")), Path::new("."));
        assert_eq!(parent_dir(Path::new("etc/secrets.toml")), Path::new("etc"));
        assert_eq!(parent_dir(Path::new("/secrets.toml")), Path::new("/"));
    }

    #[test]
    fn temp_file_is_hidden_and_beside_the_target() {
        let dir = Path::new("/x/y");
        let tmp = temp_path(dir, Path::new("/x/y/secrets.toml")).unwrap();
        assert_eq!(tmp.parent(), Some(dir));
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".secrets.toml.") && name.ends_with(".tmp"), "{name}");
        assert!(temp_path(dir, Path::new("/")).is_err());
    }

    #[test]
    fn failed_write_leaves_target_untouched_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go makes the rename fail.
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"x").unwrap();
        assert!(write_atomic(&target, b"new").is_err());
        assert!(target.join("keep").exists());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["target"]);
    }
}
