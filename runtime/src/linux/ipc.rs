//! System V IPC (clusters 21, 22, 23, 56, 61, 62 and 64, 65, 66): the kernel's semaphore,
//! message queue and shared memory limits and usage, and one instance per semaphore set,
//! queue and segment.
//!
//! Limits and usage come, as in pmdalinux, from the `IPC_INFO`, `SEM_INFO`, `MSG_INFO` and
//! `SHM_INFO` commands of semctl(2), msgctl(2) and shmctl(2): they describe the live
//! kernel, so under another root they have no value. The objects are read from
//! `/proc/sysvipc/{shm,msg,sem}` under the root; an owner is named as pmdalinux names it on
//! the live host (the C library's `getpwuid`, so users of NSS sources too), from the root's
//! `etc/passwd` under another root, else by number. Every value is 32-bit, as pmdalinux stores them.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

// The kernel's command numbers (linux/ipc.h, linux/shm.h, linux/sem.h, linux/msg.h).
const IPC_INFO: libc::c_int = 3;
const SHM_INFO: libc::c_int = 14;
const SEM_INFO: libc::c_int = 19;
const MSG_INFO: libc::c_int = 12;
/// Segment flags in /proc/sysvipc/shm's mode: marked for destruction, locked in memory.
const SHM_DEST: u32 = 0o1000;
const SHM_LOCKED: u32 = 0o2000;
/// Most objects taken from one /proc/sysvipc file (the kernel's own ceiling, IPCMNI, is
/// 32,768, or 16M with ipcmni_extend).
const MAX_OBJECTS: usize = 1 << 20;

#[repr(C)]
#[derive(Default)]
struct ShmInfoLimits {
    shmmax: libc::c_ulong,
    shmmin: libc::c_ulong,
    shmmni: libc::c_ulong,
    shmseg: libc::c_ulong,
    shmall: libc::c_ulong,
    unused: [libc::c_ulong; 4],
}

#[repr(C)]
#[derive(Default)]
struct ShmInfoUsage {
    used_ids: libc::c_int,
    shm_tot: libc::c_ulong,
    shm_rss: libc::c_ulong,
    shm_swp: libc::c_ulong,
    swap_attempts: libc::c_ulong,
    swap_successes: libc::c_ulong,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct SemInfo {
    semmap: libc::c_int,
    semmni: libc::c_int,
    semmns: libc::c_int,
    semmnu: libc::c_int,
    semmsl: libc::c_int,
    semopm: libc::c_int,
    semume: libc::c_int,
    semusz: libc::c_int,
    semvmx: libc::c_int,
    semaem: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MsgInfo {
    msgpool: libc::c_int,
    msgmap: libc::c_int,
    msgmax: libc::c_int,
    msgmnb: libc::c_int,
    msgmni: libc::c_int,
    msgssz: libc::c_int,
    msgtql: libc::c_int,
    msgseg: libc::c_ushort,
}

/// Values of the live kernel's limits and usage, by (cluster, item).
#[derive(Default)]
struct Kernel {
    sem_limits: Option<[u64; 10]>,
    sem_info: Option<[u64; 2]>,
    msg_limits: Option<[u64; 8]>,
    msg_info: Option<[u64; 3]>,
    shm_limits: Option<[u64; 5]>,
    shm_info: Option<[u64; 6]>,
}

fn u(v: impl TryInto<i64>) -> u64 {
    // pmdalinux stores each in 32 bits.
    v.try_into().unwrap_or(-1) as u32 as u64
}

impl Kernel {
    fn read() -> Kernel {
        let page_shift = {
            // SAFETY: sysconf has no memory effects.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if page > 0 { page.trailing_zeros() } else { 12 }
        };
        let mut k = Kernel::default();
        // SAFETY (each call below): the kernel writes at most the size of the structure
        // given for the command, which is the struct declared above with its C layout.
        unsafe {
            let mut s = SemInfo::default();
            if libc::semctl(0, 0, IPC_INFO, &mut s as *mut SemInfo) >= 0 {
                k.sem_limits = Some([
                    u(s.semmap),
                    u(s.semmni),
                    u(s.semmns),
                    u(s.semmnu),
                    u(s.semmsl),
                    u(s.semopm),
                    u(s.semume),
                    u(s.semusz),
                    u(s.semvmx),
                    u(s.semaem),
                ]);
            }
            let mut s = SemInfo::default();
            if libc::semctl(0, 0, SEM_INFO, &mut s as *mut SemInfo) >= 0 {
                k.sem_info = Some([u(s.semusz), u(s.semaem)]);
            }
            let mut m = MsgInfo::default();
            if libc::msgctl(0, IPC_INFO, &mut m as *mut MsgInfo as *mut libc::msqid_ds) >= 0 {
                k.msg_limits = Some([
                    u(m.msgpool),
                    u(m.msgmap),
                    u(m.msgmax),
                    u(m.msgmnb),
                    u(m.msgmni),
                    u(m.msgssz),
                    u(m.msgtql),
                    u(m.msgseg),
                ]);
            }
            let mut m = MsgInfo::default();
            if libc::msgctl(0, MSG_INFO, &mut m as *mut MsgInfo as *mut libc::msqid_ds) >= 0 {
                k.msg_info = Some([u(m.msgpool), u(m.msgmap), u(m.msgtql)]);
            }
            // The largest of the two structures, so either command fits.
            let mut lim = ShmInfoLimits::default();
            if libc::shmctl(
                0,
                IPC_INFO,
                &mut lim as *mut ShmInfoLimits as *mut libc::shmid_ds,
            ) >= 0
            {
                k.shm_limits = Some([
                    lim.shmmax as u32 as u64,
                    lim.shmmin as u32 as u64,
                    lim.shmmni as u32 as u64,
                    lim.shmseg as u32 as u64,
                    lim.shmall as u32 as u64,
                ]);
            }
            let mut buf = [0u8; 256];
            let p = buf.as_mut_ptr() as *mut libc::shmid_ds;
            if libc::shmctl(0, SHM_INFO, p) >= 0 {
                let i = std::ptr::read_unaligned(buf.as_ptr() as *const ShmInfoUsage);
                let pages = |v: libc::c_ulong| (v << page_shift) as u32 as u64;
                k.shm_info = Some([
                    pages(i.shm_tot),
                    pages(i.shm_rss),
                    pages(i.shm_swp),
                    u(i.used_ids),
                    i.swap_attempts as u32 as u64,
                    i.swap_successes as u32 as u64,
                ]);
            }
        }
        k
    }

    fn value(&self, m: &Metric) -> Option<u64> {
        let i = m.item as usize;
        match m.cluster {
            21 => self.sem_limits?.get(i).copied(),
            61 => self.sem_info?.get(i).copied(),
            22 => self.msg_limits?.get(i).copied(),
            62 => self.msg_info?.get(i).copied(),
            23 => self.shm_limits?.get(i).copied(),
            56 => self.shm_info?.get(i).copied(),
            _ => None,
        }
    }
}

/// One object of a /proc/sysvipc file.
struct Object {
    id: String,
    key: String,
    owner: String,
    /// Permission bits as pmdalinux reports them: the octal digits read as decimal (0640
    /// → 640).
    perms: u64,
    /// shm: size, nattch, cpid, lpid, status; msg: bytes, messages, lspid, lrpid; sem:
    /// nsems.
    nums: [u64; 4],
    status: &'static str,
}

#[derive(Default)]
pub struct Ipc {
    buf: String,
    kernel: Kernel,
    shm: Vec<Object>,
    msg: Vec<Object>,
    sem: Vec<Object>,
}

/// uid → name from a passwd file's text.
fn passwd_owner(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// Most bytes `getpwuid_r` may use for one entry's strings: an entry larger than this (no
/// real one is) is named by number rather than grown without bound.
const PW_BUF_MAX: usize = 64 << 10;

/// uid → name from the C library's user database (files, and NSS sources such as LDAP or
/// sssd), as pmdalinux's `getpwuid` names owners on the live host.
fn live_owner(uid: u32) -> Option<String> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        // SAFETY: an all-zero `passwd` is a valid value to be overwritten.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call and `buf` has `buf.len()` bytes.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
        if rc == libc::ERANGE && buf.len() < PW_BUF_MAX {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pw.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` points at a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

/// Parses one /proc/sysvipc file: `min` fields needed, the columns of key, id, mode, uid
/// and of the four numbers wanted.
fn objects(
    text: &str,
    min: usize,
    uid_at: usize,
    nums_at: &[usize],
    shm: bool,
    owner: &mut dyn FnMut(u32) -> String,
) -> Vec<Object> {
    let mut out: Vec<Object> = Vec::new();
    let mut fields: Vec<&str> = Vec::with_capacity(16);
    // Ids taken: a search of `out` per line would be quadratic in a long file.
    let mut seen = std::collections::HashSet::new();
    for line in text.lines().skip(1) {
        fields.clear();
        fields.extend(line.split_ascii_whitespace());
        if fields.len() < min || out.len() >= MAX_OBJECTS {
            continue;
        }
        let (Ok(key), Ok(id), Ok(mode)) = (
            fields[0].parse::<i32>(),
            fields[1].parse::<u32>(),
            u32::from_str_radix(fields[2], 8),
        ) else {
            continue;
        };
        let Some(uid) = fields.get(uid_at).and_then(|f| f.parse::<u32>().ok()) else {
            continue;
        };
        // A repeated id keeps its first line, as pmdalinux's cache does.
        if !seen.insert(id) {
            continue;
        }
        let id = id.to_string();
        let mut nums = [0u64; 4];
        for (slot, &at) in nums.iter_mut().zip(nums_at) {
            *slot = fields
                .get(at)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0) as u32 as u64;
        }
        let status = if !shm {
            ""
        } else {
            match (mode & SHM_DEST != 0, mode & SHM_LOCKED != 0) {
                (true, true) => "dest locked",
                (false, true) => "locked",
                (true, false) => "dest",
                _ => "",
            }
        };
        out.push(Object {
            id,
            key: format!("0x{:08x}", key as u32),
            owner: owner(uid),
            perms: format!("{:o}", mode & 0o777).parse().unwrap_or(0),
            nums,
            status,
        });
    }
    out
}

impl Group for Ipc {
    fn answers(&self, m: &Metric) -> bool {
        matches!(m.cluster, 21 | 22 | 23 | 56 | 61 | 62 | 64 | 65 | 66)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.kernel = if ctx.root.is_live() {
            Kernel::read()
        } else {
            Kernel::default()
        };
        let live = ctx.root.is_live();
        let passwd = if live {
            String::new()
        } else {
            ctx.root.attr("etc/passwd").unwrap_or_default()
        };
        // One lookup per owner per refresh (an NSS source may be a network round trip).
        let mut names = std::collections::HashMap::new();
        let mut owner = |uid: u32| {
            names
                .entry(uid)
                .or_insert_with(|| {
                    let name = if live {
                        live_owner(uid)
                    } else {
                        passwd_owner(&passwd, uid)
                    };
                    name.unwrap_or_else(|| uid.to_string())
                })
                .clone()
        };
        let mut read = |rel: &str, min, uid_at, nums_at: &[usize], shm| match ctx
            .root
            .read(rel, &mut self.buf)
        {
            Ok(text) => objects(text, min, uid_at, nums_at, shm, &mut owner),
            Err(_) => Vec::new(),
        };
        // key shmid perms size cpid lpid nattch uid ...
        self.shm = read("proc/sysvipc/shm", 8, 7, &[3, 6, 4, 5], true);
        // key msqid perms cbytes qnum lspid lrpid uid ...
        self.msg = read("proc/sysvipc/msg", 8, 7, &[3, 4, 5, 6], false);
        // key semid perms nsems uid ...
        self.sem = read("proc/sysvipc/sem", 5, 4, &[3], false);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let (objs, item) = match m.cluster {
            64 => (&self.shm, m.item),
            65 => (&self.msg, m.item),
            66 => (&self.sem, m.item),
            _ => {
                if let Some(v) = self.kernel.value(m) {
                    out.push((String::new(), Value::Uint(v)));
                }
                return;
            }
        };
        for o in objs {
            let v = match (m.cluster, item) {
                (_, 0) => Value::Text(o.key.clone()),
                (_, 1) => Value::Text(o.owner.clone()),
                (_, 2) => Value::Uint(o.perms),
                // shm: segsz, nattch, status, cpid, lpid.
                (64, 3) => Value::Uint(o.nums[0]),
                (64, 4) => Value::Uint(o.nums[1]),
                (64, 5) => Value::Text(o.status.to_string()),
                (64, 6) => Value::Uint(o.nums[2]),
                (64, 7) => Value::Uint(o.nums[3]),
                // msg: bytes, messages, lspid, lrpid.
                (65, 3..=6) => Value::Uint(o.nums[item as usize - 3]),
                (66, 3) => Value::Uint(o.nums[0]),
                _ => continue,
            };
            out.push((o.id.clone(), v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, one};
    use super::{live_owner, passwd_owner};

    #[test]
    fn objects_from_proc_sysvipc_under_a_root() {
        let (_dir, mut a) = agent(&[
            (
                "proc/sysvipc/shm",
                "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n\
                 0          32768  1600                 524288  1234  5678      2  1000  1000  1000  1000 1700000000 1700000000 1700000000                524288                     0\n\
                 -1         32769   600                   4096  1235  1235      0     0     0     0     0          0          0 1700000000                     0                     0\n",
            ),
            (
                "proc/sysvipc/msg",
                "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n\
                 305419896          0   644          10          2   300   301  1000  1000  1000  1000          0          0 1700000000\n",
            ),
            (
                "proc/sysvipc/sem",
                "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n\
                 0          0   600          4     0     0     0     0          0 1700000000\n",
            ),
            (
                "etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n",
            ),
        ]);
        a.expect(
            r#"ipc.shm.key 32768="0x00000000" 32769="0xffffffff"
            ipc.shm.owner 32768="alice" 32769="root"
            ipc.shm.perms 32768=600 32769=600
            ipc.shm.status 32768="dest" 32769=""
            ipc.shm.segsz 32768=524288 32769=4096
            ipc.shm.nattch 32768=2 32769=0
            ipc.shm.creator_pid 32768=1234 32769=1235
            ipc.shm.last_access_pid 32768=5678 32769=1235
            ipc.msg.key 0="0x12345678"
            ipc.msg.perms 0=644
            ipc.msg.msgsz 0=10
            ipc.msg.messages 0=2
            ipc.msg.last_recv_pid 0=301
            ipc.sem.nsems 0=4
            # Limits are the live kernel's: none under a captured root.
            ipc.sem.max_semid -
            ipc.shm.tot -"#,
        );
    }

    /// Owners: under a captured root, that root's etc/passwd (its uid 0 may be named
    /// otherwise than the host's) else the number; on the live host, the C library's user
    /// database, whose answer for uid 0 and this process's uid is the host's.
    #[test]
    fn owners_from_the_roots_passwd_or_the_live_user_database() {
        let (_dir, mut a) = agent(&[
            (
                "proc/sysvipc/sem",
                "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n\
                 0          0   600          4     0     0     0     0          0 1700000000\n\
                 1          1   600          4  4242     0     0     0          0 1700000000\n",
            ),
            ("etc/passwd", "toor:x:0:0::/:/bin/sh\n"),
        ]);
        a.expect(r#"ipc.sem.owner 0="toor" 1="4242""#);
        assert_eq!(live_owner(0).as_deref(), Some("root"));
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let host = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if let Some(name) = passwd_owner(&host, me) {
            assert_eq!(live_owner(me), Some(name));
        }
        assert_eq!(live_owner(4_000_000_000), None);
    }

    #[test]
    fn live_limits_match_proc_sys_kernel() {
        let mut a = LinuxAgent::new();
        // The numbers of /proc/sys/kernel/NAME.
        let kernel = |name: &str| -> Vec<f64> {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .unwrap()
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect()
        };
        let sem = kernel("sem");
        // /proc/sys/kernel/sem: SEMMSL SEMMNS SEMOPM SEMMNI.
        assert_eq!(one(&mut a, "ipc.sem.max_perid"), Some(sem[0]));
        assert_eq!(one(&mut a, "ipc.sem.max_sem"), Some(sem[1]));
        assert_eq!(one(&mut a, "ipc.sem.max_ops"), Some(sem[2]));
        assert_eq!(one(&mut a, "ipc.sem.max_semid"), Some(sem[3]));
        assert_eq!(one(&mut a, "ipc.msg.max_msgsz"), Some(kernel("msgmax")[0]));
        assert_eq!(one(&mut a, "ipc.shm.max_seg"), Some(kernel("shmmni")[0]));
        assert!(one(&mut a, "ipc.shm.used_ids").is_some());
    }
}
