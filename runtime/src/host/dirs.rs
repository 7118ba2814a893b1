//! Read-only directory grants (`grants.dirs` with `read-only`, the default): how a guest opens
//! a file or directory under one. It owns WASI's `descriptor.open-at` for descriptors of
//! read-only grants; everything else about preopened directories (reads, directory listings,
//! stat, the refusal of every write) stays wasmtime-wasi's. It may not touch other imports.
//!
//! wasmtime-wasi opens through cap-std, which keeps a guest inside the granted root and follows
//! the symlinks that stay inside it (`/sys/class/net/eth0 -> ../../devices/...` under a `/sys`
//! grant), but opens as an ordinary program would: a FIFO's open waits for a writer, and a
//! `trace_pipe`'s reads wait for data, each holding a host thread after the guest's deadline
//! abandoned the call; and a device node opens and reads like a file. Here an open of a
//! read-only grant is one `openat2(2)`:
//!
//! - `RESOLVE_BENEATH`: `..`, absolute paths and symlinks leading outside the granted
//!   directory fail (`EXDEV`), relative symlinks inside are followed (`/proc/self -> PID`);
//! - `RESOLVE_NO_MAGICLINKS`: procfs's magic links (`/proc/PID/root`, `cwd`, `exe`, `fd/N`)
//!   fail, since they lead wherever the process points;
//! - `O_NONBLOCK`: the open of a FIFO returns at once, and a file that would block a read
//!   (`trace_pipe`, `/proc/kmsg`) answers "would block" instead;
//! - then only a regular file or a directory is handed to the guest: FIFOs, sockets and device
//!   nodes are refused ("access denied").
//!
//! procfs and sysfs files that report size 0 read in full: WASI reads go to end of file, each
//! one capped at 64 KiB by wasmtime-wasi; what a guest keeps is bounded by its memory cap, and
//! a guest that reads forever by its deadline.
//!
//! Where the opened file or directory lies on a [local](is_local) filesystem (procfs, sysfs,
//! cgroupfs, tmpfs, a local disk), its reads, stats and listings run on the calling thread
//! (wasmtime-wasi's `allow_blocking_current_thread`) instead of being handed to tokio's
//! blocking pool and waited for: a collector's poll is a few hundred such operations on small
//! files, and the thread handoff was most of its cost (issue 30). Nothing there can wait for
//! long: the descriptor is a regular file or a directory opened `O_NONBLOCK`, so a read that
//! would wait for data answers "would block". A file on a network or FUSE filesystem (whose
//! read may wait on a server for ever) keeps the blocking pool, so that the call can still be
//! abandoned at the guest's deadline.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::Result;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::FsPerms;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

use super::state::State;

/// The WASI filesystem interface whose `open-at` this module answers (wasmtime-wasi 48's
/// version; a guest importing an older 0.2.x is linked to it by semver).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Adds the read-only `open-at` to `linker`, over wasmtime-wasi's (already added).
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<()> {
    type Args = (
        Resource<Descriptor>,
        PathFlags,
        String,
        OpenFlags,
        DescriptorFlags,
    );
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store, (fd, path_flags, path, oflags, flags): Args| {
            Box::new(async move {
                let state = store.data_mut();
                let read_only = match state.table.get(&fd)? {
                    Descriptor::Dir(d) if d.perms == FsPerms::ReadOnly => Some(d.clone()),
                    _ => None,
                };
                let Some(dir) = read_only else {
                    // Read-write grants, and the error a file descriptor gets: wasmtime-wasi's.
                    let mut fs = state.filesystem();
                    let opened = fs.open_at(fd, path_flags, path, oflags, flags).await;
                    return match opened {
                        Ok(fd) => Ok((Ok(fd),)),
                        Err(e) => Ok((Err(e.downcast()?),)),
                    };
                };
                let opened = open_read_only(&dir, &path, path_flags, oflags, flags);
                let answer = match opened {
                    Ok(d) => Ok(state.table.push(d)?),
                    Err(code) => Err(code),
                };
                Ok((answer,))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Opens `path` under the read-only directory `dir` for reading (see the module's doc).
fn open_read_only(
    dir: &Dir,
    path: &str,
    path_flags: PathFlags,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<Descriptor, ErrorCode> {
    let writes = oflags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::EXCLUSIVE)
        || flags.intersects(DescriptorFlags::WRITE | DescriptorFlags::MUTATE_DIRECTORY);
    if writes {
        return Err(ErrorCode::NotPermitted);
    }
    let opened = open_beneath(
        dir.dir.as_raw_fd(),
        path,
        oflags.contains(OpenFlags::DIRECTORY),
        path_flags.contains(PathFlags::SYMLINK_FOLLOW),
    )?;
    match opened.kind {
        Kind::Dir => Ok(Descriptor::Dir(Dir::new(
            opened.file,
            FsPerms::ReadOnly,
            OpenMode::READ,
            opened.local,
        ))),
        Kind::File => Ok(Descriptor::File(File::new(
            opened.file,
            FsPerms::ReadOnly,
            OpenMode::READ,
            opened.local,
        ))),
        // A FIFO, socket or device node: nothing a collector reads, and each can block or
        // never end.
        Kind::Other => Err(ErrorCode::Access),
    }
}

/// What an open beneath a read-only root found.
pub(super) enum Kind {
    Dir,
    File,
    /// A FIFO, socket or device node (opened without blocking, never read).
    Other,
}

/// A file or directory opened beneath a read-only root.
pub(super) struct Opened {
    pub file: std::fs::File,
    pub kind: Kind,
    /// Whether it lies on a [local](is_local) filesystem.
    pub local: bool,
}

/// Opens `path` beneath the directory `dirfd` for reading, as the module's doc says: one
/// `openat2` (`directory`: it must be one; `follow`: a symlink as the last component is
/// followed, inside the root only), then its kind and filesystem.
pub(super) fn open_beneath(
    dirfd: i32,
    path: &str,
    directory: bool,
    follow: bool,
) -> Result<Opened, ErrorCode> {
    let mut o_flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if directory {
        o_flags |= libc::O_DIRECTORY;
    }
    if !follow {
        o_flags |= libc::O_NOFOLLOW;
    }
    let fd = openat2(
        dirfd,
        path,
        o_flags,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    )?;
    let file = std::fs::File::from(fd);
    let kind = file.metadata().map_err(|e| code_of(&e))?.file_type();
    let kind = if kind.is_dir() {
        Kind::Dir
    } else if kind.is_file() {
        Kind::File
    } else {
        Kind::Other
    };
    let local = is_local(&file);
    Ok(Opened { file, kind, local })
}

/// `statfs(2)`'s `f_type` of the filesystems whose reads never wait on anything but this
/// machine: the kernel's own (procfs, sysfs, cgroup v1 and v2, tracefs, debugfs, securityfs,
/// configfs, efivarfs), memory (tmpfs, ramfs) and local disks (ext2-4, xfs, btrfs, f2fs,
/// overlayfs, squashfs, iso9660). Values from linux/magic.h; a filesystem missing here is
/// only slower (its calls keep the blocking pool), never less safe.
const LOCAL_FILESYSTEMS: &[u64] = &[
    0x9fa0,      // PROC_SUPER_MAGIC
    0x6265_6572, // SYSFS_MAGIC
    0x0027_e0eb, // CGROUP_SUPER_MAGIC
    0x6367_7270, // CGROUP2_SUPER_MAGIC
    0x7472_6163, // TRACEFS_MAGIC
    0x6462_6720, // DEBUGFS_MAGIC
    0x7363_6673, // SECURITYFS_MAGIC
    0x6265_6570, // CONFIGFS_MAGIC
    0xde5e_81e4, // EFIVARFS_MAGIC
    0x0102_1994, // TMPFS_MAGIC
    0x8584_58f6, // RAMFS_MAGIC
    0xef53,      // EXT2/3/4_SUPER_MAGIC
    0x5846_5342, // XFS_SUPER_MAGIC
    0x9123_683e, // BTRFS_SUPER_MAGIC
    0xf2f5_2010, // F2FS_SUPER_MAGIC
    0x794c_7630, // OVERLAYFS_SUPER_MAGIC
    0x7371_7368, // SQUASHFS_MAGIC
    0x9660,      // ISOFS_SUPER_MAGIC
];

/// Whether `file` lies on one of the [`LOCAL_FILESYSTEMS`], whose operations may run on the
/// calling thread (see the module's doc). An `fstatfs` that fails answers no.
pub(super) fn is_local(file: &std::fs::File) -> bool {
    // SAFETY: statfs is plain old data, filled by the kernel; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor we own and a struct of the size the call expects.
    let ok = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } == 0;
    ok && LOCAL_FILESYSTEMS.contains(&(st.f_type as u64))
}

/// `openat2(2)`: opened without blocking (`O_NONBLOCK` is among `flags`), so it returns at
/// once whatever the path names.
fn openat2(dirfd: i32, path: &str, flags: i32, resolve: u64) -> Result<OwnedFd, ErrorCode> {
    let c_path = CString::new(path).map_err(|_| ErrorCode::IllegalByteSequence)?;
    // SAFETY: open_how is plain old data; all-zero is its documented empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    loop {
        // SAFETY: the path is NUL-terminated, `how` lives across the call and its size is
        // passed; on success the kernel returns a new descriptor that we own.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dirfd,
                c_path.as_ptr(),
                &mut how as *mut libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a descriptor the kernel just returned, owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(code_of(&err));
        }
    }
}

/// WASI's error for an errno of an open.
fn code_of(err: &std::io::Error) -> ErrorCode {
    match err.raw_os_error().unwrap_or(0) {
        libc::ENOENT => ErrorCode::NoEntry,
        libc::EACCES => ErrorCode::Access,
        // EXDEV: the path leads outside the granted directory (RESOLVE_BENEATH), or through
        // a magic link; EPERM: the kernel's own refusal.
        libc::EXDEV | libc::EPERM => ErrorCode::NotPermitted,
        libc::ELOOP => ErrorCode::Loop,
        libc::ENOTDIR => ErrorCode::NotDirectory,
        libc::EISDIR => ErrorCode::IsDirectory,
        libc::ENAMETOOLONG => ErrorCode::NameTooLong,
        libc::EAGAIN => ErrorCode::WouldBlock,
        libc::ENXIO | libc::ENODEV => ErrorCode::NoSuchDevice,
        libc::EMFILE | libc::ENFILE | libc::ENOMEM => ErrorCode::InsufficientMemory,
        libc::EINVAL => ErrorCode::Invalid,
        // ENOSYS: a kernel before 5.6 has no openat2; refused rather than opened unsandboxed.
        libc::ENOSYS => ErrorCode::Unsupported,
        _ => ErrorCode::Io,
    }
}
