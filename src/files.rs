//! Reading files a tenant supplies (plugins, signatures, manifests, model configurations): only
//! regular files, bounded in size, and, from async code, off the serving threads with a
//! deadline. A FIFO, a device or a file on a hung network file system must cost its own load an
//! error, never a serving thread: a blocking `read` of a FIFO on a serving thread froze every
//! connection that thread served until someone wrote to it.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long reading one file may take before its load fails (the read itself may go on in the
/// background: a blocked system call cannot be interrupted; it holds one blocking-pool thread,
/// never a serving thread).
pub const READ_DEADLINE: Duration = Duration::from_secs(30);

/// Why a file could not be read, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The path names a FIFO, a socket, a device or a folder.
    #[error("{} is not a regular file (it is {kind})", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead (`a FIFO`, `a socket`, `a device`, `a folder`).
        kind: &'static str,
    },
    /// The file is larger than its kind may be.
    #[error("{} is {size} bytes; at most {max} are read", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, in bytes.
        size: u64,
        /// The most bytes read from a file of its kind.
        max: u64,
    },
    /// Reading did not finish within [`READ_DEADLINE`].
    #[error("reading {} took longer than {} s", path.display(), READ_DEADLINE.as_secs())]
    Deadline {
        /// The file.
        path: PathBuf,
    },
    /// The file is missing or unreadable.
    #[error("cannot read {}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The kind of the I/O error (`NotFound` for a missing file).
        kind: std::io::ErrorKind,
        /// The I/O error as the system describes it.
        message: String,
    },
}

impl FileError {
    fn io(path: &Path, error: &std::io::Error) -> FileError {
        FileError::Io {
            path: path.to_owned(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }

    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { kind, .. } if *kind == std::io::ErrorKind::NotFound)
    }
}

/// What a non-regular file is, for the error.
/// What a file that is not regular is, as errors name it.
pub fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// `path` opened for reading without blocking (a FIFO's `open` waits for a writer otherwise),
/// with its metadata, if the open descriptor is a regular file.
fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| FileError::io(path, &e))?;
    let metadata = file.metadata().map_err(|e| FileError::io(path, &e))?;
    if !metadata.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(metadata.file_type()),
        });
    }
    Ok((file, metadata))
}

/// Reads `path` whole, in the calling thread, if it is a regular file of at most `max_bytes`.
/// It is opened without blocking (a FIFO's `open` waits for a writer otherwise) and checked on
/// the open descriptor, so a file swapped for a FIFO after a check is still refused; a file
/// that grows while it is read is cut at `max_bytes + 1` and refused.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let (file, metadata) = open_regular(path)?;
    let too_large = |size| FileError::TooLarge {
        path: path.to_owned(),
        size,
        max: max_bytes,
    };
    if metadata.len() > max_bytes {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(path, &e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The first `max_bytes` of `path` (fewer when it is shorter), in the calling thread, if it is a
/// regular file; opened without blocking and checked on the open descriptor, as
/// [`read_regular`].
pub fn read_head(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(path, &e))?;
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_text(path: &Path, max_bytes: u64) -> Result<String, FileError> {
    String::from_utf8(read_regular(path, max_bytes)?).map_err(|_| FileError::Io {
        path: path.to_owned(),
        kind: std::io::ErrorKind::InvalidData,
        message: "not UTF-8 text".into(),
    })
}

/// [`read_regular`] on tokio's blocking pool, failing after [`READ_DEADLINE`].
pub async fn read(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let owned = path.to_owned();
    off_thread(path, move || read_regular(&owned, max_bytes)).await?
}

/// [`read_regular_text`] on tokio's blocking pool, failing after [`READ_DEADLINE`].
pub async fn read_text(path: &Path, max_bytes: u64) -> Result<String, FileError> {
    let owned = path.to_owned();
    off_thread(path, move || read_regular_text(&owned, max_bytes)).await?
}

/// Runs `work` (file system calls about `path`) on tokio's blocking pool, failing after
/// [`READ_DEADLINE`].
pub async fn off_thread<T: Send + 'static>(
    path: &Path,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, FileError> {
    off_thread_within(path, READ_DEADLINE, work).await
}

/// Runs `work` (file system calls about `path`) on tokio's blocking pool, failing after
/// `within`.
pub async fn off_thread_within<T: Send + 'static>(
    path: &Path,
    within: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, FileError> {
    let deadline = || FileError::Deadline {
        path: path.to_owned(),
    };
    match tokio::time::timeout(within, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(joined)) => Err(FileError::Io {
            path: path.to_owned(),
            kind: std::io::ErrorKind::Other,
            message: format!("the read failed: {joined}"),
        }),
        Err(_) => Err(deadline()),
    }
}

#[cfg(test)]
mod tests {
    use super::{FileError, read_regular};

    #[test]
    fn regular_files_are_read_within_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_regular(&path, 5).unwrap(), b"12345");
        assert!(matches!(
            read_regular(&path, 4),
            Err(FileError::TooLarge {
                size: 5,
                max: 4,
                ..
            })
        ));
        let missing = read_regular(&dir.path().join("b"), 5).unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
    }

    #[test]
    fn a_fifo_or_a_folder_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Nobody writes to it: a blocking open or read would never return.
        let error = read_regular(&fifo, 1 << 20).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("{} is not a regular file (it is a FIFO)", fifo.display())
        );
        let error = read_regular(dir.path(), 1 << 20).unwrap_err();
        assert!(error.to_string().ends_with("(it is a folder)"), "{error}");
    }
}
