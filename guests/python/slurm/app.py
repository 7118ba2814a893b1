"""`slurm`: per-job CPU, memory and I/O of Slurm jobs from cgroup v2, one instance per job.

It reads what cc-metric-collector's `slurm_cgroup` collector reads, from the same directories:
every `job_<id>` (Slurm up to 25.11) or SLUID (`s` and 13 Crockford base-32 characters, Slurm
26.05 on) directory directly under `cgroup_base` (default
`/sys/fs/cgroup/system.slice/slurmstepd.scope`), and its `memory.current`, `memory.peak`,
`memory.max`, `cpu.stat` and `cpuset.cpus`, with the same meanings and formulas (user and
system CPU as percentages of `usage_usec`; an unlimited `memory.max` as 0). It adds the job's
`io.stat`, summed over devices. cc-metric-collector divides each job value by the job's CPUs
and sends it per hardware thread, and 0 for each online hardware thread no job holds; here a
job is one instance (its job id, or its SLUID), `slurm.job.hwthread` has one instance per job
and hardware thread of its cpuset (`4201:cpu3`), and `slurm.hwthread.jobs` one per online
hardware thread (`/sys/devices/system/cpu/online`, the file cc-metric-collector reads), so a
transformer (the ClusterCockpit profile's) does that split.

A file that is missing or unreadable gives no value for its metrics of that job (memory.peak
needs Linux 5.19); reads are bounded (MAX_READ), so a hostile tree costs at most that much per
file. Parameters::

    {"cgroup_base": "/sys/fs/cgroup/system.slice/slurmstepd.scope",
     "cpu_online": "/sys/devices/system/cpu/online", "domain": 490}
"""

import os
import re
import stat

from wasmon_guest import Metric, Tree, UnknownPmid, export_agent, log, read_file

# cgroup files are a few lines; a larger one is not a cgroup file (a hostile tree), and reading
# it whole would cost the guest's memory and deadline.
MAX_READ = 64 * 1024
# Jobs reported per fetch: a node runs at most a few hundred; past this the rest are skipped
# with a log line, so a tree of a million directories cannot exhaust the guest.
MAX_JOBS = 4096
# Directories listed under cgroup_base per fetch (jobs and anything else).
MAX_ENTRIES = 65536
# Hardware threads in one cpuset or in the online list: the largest nodes have a few
# thousand; a list naming more (a hostile file) is taken as malformed rather than expanded.
MAX_CPUS = 16384

JOB_DIR = re.compile(r"^job_([0-9]+)$")
SLUID_DIR = re.compile(r"^[sS][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{13}$")

# (cluster 1 item, name, semantics, units, help, type)
JOB_METRICS = [
    (1, "memory.used", "instant", "byte", "memory the job's cgroup uses now (memory.current)", "uint64"),
    (2, "memory.peak", "instant", "byte", "most memory the job's cgroup ever used (memory.peak)", "uint64"),
    (3, "memory.limit", "discrete", "byte", "the job's memory limit (memory.max; 0 when unlimited)", "uint64"),
    (4, "cpu.usage", "counter", "microsec", "CPU time the job used (cpu.stat usage_usec)", "uint64"),
    (5, "cpu.user", "counter", "microsec", "user CPU time of the job (cpu.stat user_usec)", "uint64"),
    (6, "cpu.system", "counter", "microsec", "system CPU time of the job (cpu.stat system_usec)", "uint64"),
    (7, "cpu.user_percent", "instant", "", "user share of the job's CPU time since it started, percent", "double"),
    (8, "cpu.system_percent", "instant", "", "system share of the job's CPU time since it started, percent", "double"),
    (9, "cpus", "discrete", "count", "CPUs in the job's cpuset (cpuset.cpus)", "uint32"),
    (10, "cpuset", "discrete", "", "the job's CPUs as cpuset.cpus lists them", "text"),
    (11, "io.read_bytes", "counter", "byte", "bytes the job read from block devices (io.stat rbytes)", "uint64"),
    (12, "io.write_bytes", "counter", "byte", "bytes the job wrote to block devices (io.stat wbytes)", "uint64"),
    (13, "io.read_ops", "counter", "count", "reads the job issued to block devices (io.stat rios)", "uint64"),
    (14, "io.write_ops", "counter", "count", "writes the job issued to block devices (io.stat wios)", "uint64"),
]
# Per job and hardware thread (cluster 2), per online hardware thread (cluster 3).
HWTHREAD_HELP = ("the hardware threads of each job's cpuset, one instance per job and thread "
                 "(JOB:cpuN), the thread's number as value")
ONLINE_HELP = ("how many jobs' cpusets hold each online hardware thread (cpuN, from "
               "/sys/devices/system/cpu/online); 0 for a thread no job holds")


def read_text(path):
    """The file's text (at most MAX_READ bytes), or None when it cannot be read."""
    data = read_file(path, MAX_READ)
    return None if data is None else data.decode("ascii", "replace")


def read_int(path):
    """A file holding one unsigned integer, or None."""
    text = read_text(path)
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_cpus(text):
    """`0-3,8` -> [0, 1, 2, 3, 8] (cc-metric-collector's ParseCPUs), or None when malformed."""
    cpus = []
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo.strip())
            last = int(hi.strip()) if sep else first
        except ValueError:
            return None
        # A range no machine has (a hostile file) is not expanded.
        if first < 0 or last < first or len(cpus) + last - first >= MAX_CPUS:
            return None
        cpus.extend(range(first, last + 1))
    return cpus


def job_values(d):
    """{name: value} of one job directory; a metric whose file is unreadable is left out."""
    v = {}
    used = read_int(d + "/memory.current")
    if used is not None:
        v["memory.used"] = used
    peak = read_int(d + "/memory.peak")
    if peak is not None:
        v["memory.peak"] = peak
    limit = read_text(d + "/memory.max")
    if limit is not None:
        limit = limit.strip()
        if limit == "max":
            v["memory.limit"] = 0  # as cc-metric-collector: its ParseFloat fails, the value stays 0
        elif limit.isdigit():
            v["memory.limit"] = int(limit)
    stat = read_text(d + "/cpu.stat")
    if stat is not None:
        fields = {}
        for line in stat.splitlines():
            words = line.split()
            if len(words) >= 2 and words[1].isdigit():
                fields[words[0]] = int(words[1])
        usage = fields.get("usage_usec")
        user = fields.get("user_usec")
        system = fields.get("system_usec")
        if usage is not None:
            v["cpu.usage"] = usage
        if user is not None:
            v["cpu.user"] = user
        if system is not None:
            v["cpu.system"] = system
        # cc-metric-collector's formulas: shares of usage_usec, 0 while it is 0.
        if usage:
            v["cpu.user_percent"] = (user or 0) * 100.0 / usage
            v["cpu.system_percent"] = (system or 0) * 100.0 / usage
        elif usage is not None:
            v["cpu.user_percent"] = 0.0
            v["cpu.system_percent"] = 0.0
    cpuset = read_text(d + "/cpuset.cpus")
    if cpuset is not None:
        cpus = parse_cpus(cpuset)
        if cpus is not None:
            v["cpus"] = len(cpus)
            v["cpuset"] = cpuset.strip()
            # Each thread once (an instance name is unique), in the file's order.
            v["_hwthreads"] = list(dict.fromkeys(cpus))
    io = read_text(d + "/io.stat")
    if io is not None:
        sums = {"rbytes": 0, "wbytes": 0, "rios": 0, "wios": 0}
        for line in io.splitlines():
            for word in line.split()[1:]:
                key, _, num = word.partition("=")
                if key in sums and num.isdigit():
                    sums[key] += int(num)
        v["io.read_bytes"] = sums["rbytes"]
        v["io.write_bytes"] = sums["wbytes"]
        v["io.read_ops"] = sums["rios"]
        v["io.write_ops"] = sums["wios"]
    return v


def read_jobs(base):
    """[(instance, {name: value})] of the jobs under `base`, in directory-name order, and how
    many were skipped past MAX_JOBS."""
    try:
        with os.scandir(base) as it:
            entries = []
            for e in it:
                if len(entries) == MAX_ENTRIES:
                    break
                entries.append(e)
    except OSError:
        return [], 0
    jobs = []
    for e in entries:
        m = JOB_DIR.match(e.name)
        if not m and not SLUID_DIR.match(e.name):
            continue
        try:
            # Followed: a link out of the grant fails here (the sandbox refuses it) and is no job.
            if not stat.S_ISDIR(os.stat(e.path).st_mode):
                continue
        except OSError:
            continue
        jobs.append((m.group(1) if m else e.name, e.path))
    jobs.sort(key=lambda j: (len(j[0]), j[0]))
    skipped = max(0, len(jobs) - MAX_JOBS)
    return [(name, job_values(path)) for name, path in jobs[:MAX_JOBS]], skipped


class Slurm(Tree):
    def __init__(self, params):
        self.base = params.string("cgroup_base", "/sys/fs/cgroup/system.slice/slurmstepd.scope")
        self.online_path = params.string("cpu_online", "/sys/devices/system/cpu/online")
        self.domain = params.integer("domain", 490, min=1, max=510)
        indom = (self.domain << 22) | 0
        metrics = {"slurm.jobs": Metric((self.domain, 0, 0), "instant", "count",
                                        "Slurm jobs with a cgroup on this node", type="uint32"),
                   "slurm.job.hwthread": Metric((self.domain, 2, 0), "discrete", "", HWTHREAD_HELP,
                                                (self.domain << 22) | 1, "uint32"),
                   "slurm.hwthread.jobs": Metric((self.domain, 3, 0), "instant", "count", ONLINE_HELP,
                                                 (self.domain << 22) | 2, "uint32")}
        self.by_item = {}
        for item, name, sem, units, help, ty in JOB_METRICS:
            metrics["slurm.job." + name] = Metric((self.domain, 1, item), sem, units, help, indom, ty)
            self.by_item[item] = name
        Tree.__init__(self, "slurm", metrics)
        self.jobs = None
        self.last_skipped = 0

    def fetch(self, pmid):
        if pmid.domain != self.domain:
            raise UnknownPmid()
        if self.jobs is None:
            self.jobs, skipped = read_jobs(self.base)
            if skipped != self.last_skipped and skipped:
                log("warn", "%s: more than %d jobs; %d skipped" % (self.base, MAX_JOBS, skipped))
            self.last_skipped = skipped
        if pmid.cluster == 0 and pmid.item == 0:
            return len(self.jobs)
        if pmid.cluster == 2 and pmid.item == 0:
            return [("%s:cpu%d" % (job, c), c)
                    for job, values in self.jobs for c in values.get("_hwthreads", ())]
        if pmid.cluster == 3 and pmid.item == 0:
            return self.online_threads()
        name = self.by_item.get(pmid.item) if pmid.cluster == 1 else None
        if name is None:
            raise UnknownPmid()
        return [(job, values[name]) for job, values in self.jobs if name in values]

    def online_threads(self):
        """[(cpuN, jobs holding it)] over the online hardware threads; none when the online
        list cannot be read or does not parse."""
        text = read_text(self.online_path)
        cpus = parse_cpus(text) if text is not None else None
        if cpus is None:
            return []
        held = {}
        for _, values in self.jobs:
            for c in values.get("_hwthreads", ()):
                held[c] = held.get(c, 0) + 1
        return [("cpu%d" % c, held.get(c, 0)) for c in dict.fromkeys(cpus)]

    def fetched(self):
        # One scan per fetch call, however many metrics it asks for.
        self.jobs = None


Namespace, Metrics = export_agent(Slurm)
