//! The dashboard's files sealed into the binary: appended after the executable, so
//! the binary runs alone from any directory and always serves the bundle it was
//! sealed with.
//!
//! Appended rather than compiled in (`include_bytes!`): the server and the bundle
//! still build side by side, a new bundle costs no recompile (a copy of the binary
//! with a new tail), and the Rust tests' build never depends on a bundle. A tool that
//! rewrites the executable (`strip`) drops the tail; the server then falls back to a
//! site directory and says so.
//!
//! Layout, all integers little-endian:
//! `binary | (name_len: u32, name, data_len: u64, data)* | archive_len: u64 | MAGIC`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::failure::{Context, Failure, Outcome};

const MAGIC: &[u8; 8] = b"TLSITE01";
const TRAILER: u64 = 16;
/// Far above any bundle (about 4 MB with its compressed copies): a tail claiming
/// more is damage, not a bundle.
const MAX_ARCHIVE: u64 = 256 << 20;

/// Paths relative to the site root ("pkg/treeline_bg.wasm") and their bytes.
pub type Files = BTreeMap<String, Vec<u8>>;

/// The files sealed into `exe`; `Ok(None)` when it carries none.
pub fn read(exe: &Path) -> Outcome<Option<Files>> {
    let mut file = File::open(exe).with_context(|| format!("cannot open {}", exe.display()))?;
    let Some(start) = archive_start(&mut file)? else {
        return Ok(None);
    };
    let len = file
        .metadata()
        .context("cannot read the binary's size")?
        .len()
        - TRAILER;
    file.seek(SeekFrom::Start(start))
        .context("cannot read the sealed dashboard")?;
    let mut archive = Vec::new();
    file.take(len - start)
        .read_to_end(&mut archive)
        .context("cannot read the sealed dashboard")?;
    parse(&archive).map(Some)
}

/// Where the archive starts, if `file` ends with a trailer.
fn archive_start(file: &mut File) -> Outcome<Option<u64>> {
    let len = file
        .metadata()
        .context("cannot read the binary's size")?
        .len();
    if len < TRAILER {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER as usize];
    file.seek(SeekFrom::Start(len - TRAILER))
        .and_then(|_| file.read_exact(&mut trailer))
        .context("cannot read the binary's tail")?;
    if &trailer[8..] != MAGIC {
        return Ok(None);
    }
    let archive_len = u64::from_le_bytes(trailer[..8].try_into().unwrap_or_default());
    if archive_len > MAX_ARCHIVE || archive_len > len - TRAILER {
        return Err(Failure::msg(format!(
            "the sealed dashboard is damaged: its tail claims {archive_len} bytes"
        )));
    }
    Ok(Some(len - TRAILER - archive_len))
}

fn parse(mut rest: &[u8]) -> Outcome<Files> {
    let damaged = || Failure::msg("the sealed dashboard is damaged: an entry runs past its end");
    let mut files = Files::new();
    while !rest.is_empty() {
        let (len, tail) = split_len::<4>(rest).ok_or_else(damaged)?;
        let (name, tail) = split_at(tail, len).ok_or_else(damaged)?;
        let (len, tail) = split_len::<8>(tail).ok_or_else(damaged)?;
        let (data, tail) = split_at(tail, len).ok_or_else(damaged)?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| Failure::msg("the sealed dashboard is damaged: a name is not UTF-8"))?;
        files.insert(name, data.to_vec());
        rest = tail;
    }
    Ok(files)
}

fn split_len<const N: usize>(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, tail) = bytes.split_first_chunk::<N>()?;
    let mut wide = [0u8; 8];
    wide[..N].copy_from_slice(head);
    Some((u64::from_le_bytes(wide), tail))
}

fn split_at(bytes: &[u8], len: u64) -> Option<(&[u8], &[u8])> {
    let len = usize::try_from(len).ok()?;
    (len <= bytes.len()).then(|| bytes.split_at(len))
}

/// Writes `out`: the binary `exe` without any tail it had, then every file under
/// `site` (hidden ones left out), in name order so a seal of the same files is the
/// same bytes. Written beside `out` and renamed, so a running copy is never touched.
pub fn seal(exe: &Path, site: &Path, out: &Path) -> Outcome<usize> {
    let files = collect(site)?;
    if !files.contains_key("pkg/treeline_bg.wasm") {
        return Err(Failure::msg(format!(
            "{} holds no bundle (pkg/treeline_bg.wasm): build it first (make build)",
            site.display()
        )));
    }
    let mut input = File::open(exe).with_context(|| format!("cannot open {}", exe.display()))?;
    let binary_len = match archive_start(&mut input)? {
        Some(start) => start,
        None => input
            .metadata()
            .context("cannot read the binary's size")?
            .len(),
    };
    let tmp = out.with_extension("sealing");
    let mut output =
        File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    input
        .seek(SeekFrom::Start(0))
        .context("cannot read the binary")?;
    std::io::copy(&mut input.take(binary_len), &mut output).context("cannot copy the binary")?;
    let mut archive_len = 0u64;
    for (name, data) in &files {
        for part in [
            &u32::try_from(name.len()).unwrap_or(u32::MAX).to_le_bytes()[..],
            name.as_bytes(),
            &(data.len() as u64).to_le_bytes()[..],
            data,
        ] {
            output
                .write_all(part)
                .context("cannot write the sealed binary")?;
            archive_len += part.len() as u64;
        }
    }
    output
        .write_all(&archive_len.to_le_bytes())
        .and_then(|()| output.write_all(MAGIC))
        .context("cannot write the sealed binary")?;
    output
        .sync_all()
        .context("cannot write the sealed binary")?;
    drop(output);
    make_executable(&tmp)?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(files.len())
}

/// Every file under `site`, by its path relative to it.
fn collect(site: &Path) -> Outcome<Files> {
    let mut files = Files::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        let dir = site.join(&rel);
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name.contains('\\') {
                continue;
            }
            let path = rel.join(&name);
            let kind = entry
                .file_type()
                .with_context(|| format!("cannot read {}", path.display()))?;
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() {
                let data = std::fs::read(site.join(&path))
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let name = path
                    .to_string_lossy()
                    .replace(std::path::MAIN_SEPARATOR, "/");
                files.insert(name, data);
            }
        }
    }
    Ok(files)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Outcome {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Outcome {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(dir: &Path) {
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(dir.join("pkg/treeline_bg.wasm"), b"\0asm wasm").unwrap();
        std::fs::write(dir.join("pkg/.stamp"), b"hidden").unwrap();
        std::fs::write(dir.join("favicon.svg"), b"<svg/>").unwrap();
    }

    #[test]
    fn a_sealed_binary_reads_back_its_files_and_a_second_seal_replaces_them() {
        let tmp = tempfile::tempdir().unwrap();
        let (exe, out, again) = (
            tmp.path().join("exe"),
            tmp.path().join("out"),
            tmp.path().join("again"),
        );
        std::fs::write(&exe, b"#!/bin/sh\necho binary\n").unwrap();
        assert_eq!(read(&exe).unwrap(), None, "a plain binary carries nothing");
        let dir = tmp.path().join("site");
        site(&dir);
        assert_eq!(
            seal(&exe, &dir, &out).unwrap(),
            2,
            "the hidden stamp is left out"
        );
        let files = read(&out).unwrap().unwrap();
        assert_eq!(files["pkg/treeline_bg.wasm"], b"\0asm wasm");
        assert_eq!(files["favicon.svg"], b"<svg/>");
        // Sealing a sealed binary keeps one tail, the new one.
        std::fs::write(dir.join("favicon.svg"), b"<svg>new</svg>").unwrap();
        seal(&out, &dir, &again).unwrap();
        assert_eq!(
            read(&again).unwrap().unwrap()["favicon.svg"],
            b"<svg>new</svg>"
        );
        let sealed = std::fs::read(&again).unwrap();
        assert!(sealed.starts_with(b"#!/bin/sh\necho binary\n"));
        assert_eq!(sealed.windows(8).filter(|w| w == MAGIC).count(), 1);
    }

    #[test]
    fn a_damaged_tail_is_an_error_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = tmp.path().join("exe");
        let mut bytes = b"binary".to_vec();
        bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        bytes.extend_from_slice(MAGIC);
        std::fs::write(&exe, &bytes).unwrap();
        assert!(read(&exe).unwrap_err().to_string().contains("damaged"));
        // An entry that claims more bytes than the archive holds.
        let mut entry = 3u32.to_le_bytes().to_vec();
        entry.extend_from_slice(b"a.js");
        let mut bytes = b"binary".to_vec();
        bytes.extend_from_slice(&entry);
        bytes.extend_from_slice(&(entry.len() as u64).to_le_bytes());
        bytes.extend_from_slice(MAGIC);
        std::fs::write(&exe, &bytes).unwrap();
        assert!(read(&exe).unwrap_err().to_string().contains("damaged"));
    }

    #[test]
    fn a_site_without_a_bundle_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = tmp.path().join("exe");
        std::fs::write(&exe, b"binary").unwrap();
        let err = seal(&exe, tmp.path(), &tmp.path().join("out")).unwrap_err();
        assert!(err.to_string().contains("holds no bundle"));
    }
}
