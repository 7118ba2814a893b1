//! Damaged files, a real SIGKILL, and a throughput figure.

use std::io::{BufRead, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::segment::HEADER_LEN;
use super::tests::{
    cfg, check, child_queue, child_test, drain, drained_seqs, fresh, payload, push_range, samples,
    segments_of, xor_byte,
};
use super::{Queue, QueueConfig, Recovery};

const N: u64 = 20;

/// A closed queue holding records 0..N in one segment; returns (seqs, segment path).
fn closed_queue(dir: &Path) -> (Vec<u64>, PathBuf) {
    let (q, _) = Queue::open(dir, cfg()).expect("open");
    let seqs = push_range(&q, 0, N);
    drop(q);
    let seg = dir.join(super::segment::segment_name(seqs[0]));
    assert!(seg.exists());
    (seqs, seg)
}

/// Offset of record `i` in the segment `closed_queue` wrote.
fn offset(i: u64) -> u64 {
    (0..i).map(rec_len).sum()
}

fn rec_len(i: u64) -> u64 {
    (HEADER_LEN + payload(i).len()) as u64
}

fn write_at(path: &Path, at: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.write_all_at(bytes, at).expect("write");
}

/// Reopens and checks that exactly the records `expect` (indices into 0..N) come out, intact.
fn reopen_expect(dir: &Path, seqs: &[u64], expect: &[u64]) -> Recovery {
    let (q, rec) = Queue::open(dir, cfg()).expect("open never fails on damage");
    let got = drain(&q);
    let want: Vec<u64> = expect.iter().map(|&i| seqs[i as usize]).collect();
    assert_eq!(
        got.iter().map(|r| r.seq).collect::<Vec<_>>(),
        want,
        "{rec:?}"
    );
    for (r, &i) in got.iter().zip(expect) {
        assert_eq!(&r.payload[..], &payload(i)[..]);
        assert_eq!(r.samples, samples(i));
    }
    let s = check(&q);
    assert_eq!(s.damaged_records, rec.damaged_records);
    assert_eq!(rec.records, expect.len() as u64);
    rec
}

fn all_but(skip: &[u64]) -> Vec<u64> {
    (0..N).filter(|i| !skip.contains(i)).collect()
}

#[test]
fn a_damaged_payload_in_the_middle_skips_exactly_that_record() {
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, seg) = closed_queue(d.path());
    xor_byte(&seg, offset(7) + HEADER_LEN as u64 + 3, 0x01);
    let rec = reopen_expect(d.path(), &seqs, &all_but(&[7]));
    assert_eq!(
        (rec.damaged_records, rec.damaged_samples, rec.damaged_bytes),
        (1, u64::from(samples(7)), rec_len(7))
    );
    assert_eq!(rec.truncated_tail_bytes, 0);
    // Still there (the record is not removed yet): found and counted again, nothing worse.
    let rec = reopen_expect(d.path(), &seqs, &all_but(&[7]));
    assert_eq!(rec.damaged_records, 1);
}

#[test]
fn a_damaged_header_in_the_middle_resyncs_on_the_next_record() {
    // A flipped bit in the seq, in the length, in the magic; the first record; two in a row.
    for (what, damage) in [
        ("seq", vec![(7, 20)]),
        ("length", vec![(7, 10)]),
        ("magic", vec![(7, 0)]),
        ("first record", vec![(0, 30)]),
        ("two records", vec![(7, 12), (8, 44)]),
    ] {
        let d = tempfile::tempdir().expect("tempdir");
        let (seqs, seg) = closed_queue(d.path());
        for &(i, at) in &damage {
            xor_byte(&seg, offset(i) + at, 0x01);
        }
        let lost: Vec<u64> = damage.iter().map(|&(i, _)| i).collect();
        let rec = reopen_expect(d.path(), &seqs, &all_but(&lost));
        assert_eq!(rec.damaged_records, lost.len() as u64, "{what}: {rec:?}");
        assert_eq!(
            rec.damaged_bytes,
            lost.iter().map(|&i| rec_len(i)).sum::<u64>(),
            "{what}"
        );
        assert_eq!(rec.truncated_tail_bytes, 0, "{what}");
    }
}

#[test]
fn a_torn_tail_is_cut_at_the_last_intact_record() {
    let last = N - 1;
    let full = offset(N);
    // Cut inside the last record's header, at its end, inside its payload, one byte short,
    // and back into the record before it.
    for keep_of_last in [1, 10, 47, 48, 49, rec_len(last) - 1] {
        let d = tempfile::tempdir().expect("tempdir");
        let (seqs, seg) = closed_queue(d.path());
        let len = offset(last) + keep_of_last;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .and_then(|f| f.set_len(len))
            .expect("truncate");
        let rec = reopen_expect(d.path(), &seqs, &all_but(&[last]));
        assert_eq!(rec.truncated_tail_bytes, keep_of_last, "{keep_of_last}");
        assert_eq!(rec.damaged_records, 0);
        assert_eq!(
            std::fs::metadata(&seg).expect("stat").len(),
            offset(last),
            "cut"
        );
        assert!(len < full);
    }
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, seg) = closed_queue(d.path());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .and_then(|f| f.set_len(offset(N - 2) + 5))
        .expect("truncate");
    let rec = reopen_expect(d.path(), &seqs, &(0..N - 2).collect::<Vec<_>>());
    assert_eq!(rec.truncated_tail_bytes, 5);
}

#[test]
fn garbage_and_zeros_after_the_last_record_are_cut() {
    let mut fake = super::segment::Header {
        payload_len: 1 << 20, // claims more than the file holds
        payload_crc: 0,
        seq: u64::MAX / 2,
        samples: 1,
        enqueued_ns: 0,
        oldest_sample_ns: 0,
    }
    .encode()
    .to_vec();
    fake.extend_from_slice(b"WQR1 and more junk");
    let mut noise = vec![0u8; 3000];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in &mut noise {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    for (what, tail) in [
        ("zeros", vec![0u8; 4096]),
        ("noise", noise),
        ("a header whose record is not there", fake),
    ] {
        let d = tempfile::tempdir().expect("tempdir");
        let (seqs, seg) = closed_queue(d.path());
        write_at(&seg, offset(N), &tail);
        let rec = reopen_expect(d.path(), &seqs, &(0..N).collect::<Vec<_>>());
        assert_eq!(rec.truncated_tail_bytes, tail.len() as u64, "{what}");
        assert_eq!(rec.damaged_records, 0, "{what}");
    }
}

#[test]
fn a_zero_filled_last_record_after_a_power_loss_is_cut() {
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, seg) = closed_queue(d.path());
    // The size reached the disk, the data did not.
    write_at(
        &seg,
        offset(N - 2),
        &vec![0u8; (rec_len(N - 2) + rec_len(N - 1)) as usize],
    );
    let rec = reopen_expect(d.path(), &seqs, &(0..N - 2).collect::<Vec<_>>());
    assert_eq!(rec.truncated_tail_bytes, rec_len(N - 2) + rec_len(N - 1));
    // A last record whose header survived but whose payload did not: cut too.
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, seg) = closed_queue(d.path());
    write_at(
        &seg,
        offset(N - 1) + HEADER_LEN as u64,
        &vec![0u8; payload(N - 1).len()],
    );
    let rec = reopen_expect(d.path(), &seqs, &all_but(&[N - 1]));
    assert_eq!(
        (
            rec.truncated_tail_bytes,
            rec.truncated_tail_records,
            rec.damaged_records
        ),
        (rec_len(N - 1), 1, 0)
    );
}

#[test]
fn damage_in_an_old_segment_and_a_torn_newest_one() {
    let c = segments_of(600);
    let (d, q) = fresh(c.clone());
    let seqs = push_range(&q, 0, 60);
    drop(q);
    let mut segs: Vec<PathBuf> = std::fs::read_dir(d.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    assert!(segs.len() > 5);
    // The second record of the second segment: its payload.
    let s1 = &segs[1];
    let first1: u64 = s1
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("name");
    let i1 = seqs.iter().position(|&s| s == first1).expect("seq") as u64;
    xor_byte(s1, rec_len(i1) + HEADER_LEN as u64 + 1, 0x01);
    // The newest segment loses half of its last record.
    let newest = segs.last().expect("segs");
    let len = std::fs::metadata(newest).expect("stat").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(newest)
        .and_then(|f| f.set_len(len - rec_len(59) / 2))
        .expect("truncate");
    let (q, rec) = Queue::open(d.path(), c).expect("open");
    let got = drained_seqs(&q);
    let want: Vec<u64> = (0..59)
        .filter(|&i| i != i1 + 1)
        .map(|i| seqs[i as usize])
        .collect();
    assert_eq!(got, want, "{rec:?}");
    assert_eq!(rec.damaged_records, 1);
    assert_eq!(rec.truncated_tail_bytes, rec_len(59) - rec_len(59) / 2);
    // The torn record is one record of the tail (its header survived).
    assert_eq!(rec.truncated_tail_records, 1);
    check(&q);
}

#[test]
fn stray_files_and_odd_segments_do_not_stop_the_open() {
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, _) = closed_queue(d.path());
    std::fs::write(d.path().join("notes.txt"), b"x").expect("write");
    std::fs::write(d.path().join("123.seg"), b"not a segment name").expect("write");
    // An empty segment and one of pure garbage, both after the real one.
    std::fs::write(
        d.path().join(super::segment::segment_name(seqs[0] + 1000)),
        b"",
    )
    .expect("w");
    std::fs::write(
        d.path().join(super::segment::segment_name(seqs[0] + 2000)),
        [7u8; 100],
    )
    .expect("write");
    let rec = reopen_expect(d.path(), &seqs, &(0..N).collect::<Vec<_>>());
    assert_eq!(rec.truncated_tail_bytes, 100);
    // The new seqs do not collide with the odd segments' names.
    let (q, _) = Queue::open(d.path(), cfg()).expect("open");
    assert!(q.push(b"x", 1, 0).expect("push") >= seqs[0] + 2000);
}

#[test]
fn damage_after_open_is_skipped_and_counted_on_the_way_out() {
    let (d, q) = fresh(cfg());
    let seqs = push_range(&q, 0, 5);
    let seg = d.path().join(super::segment::segment_name(seqs[0]));
    xor_byte(&seg, offset(2) + HEADER_LEN as u64, 0x01);
    let got = drained_seqs(&q);
    assert_eq!(got, [seqs[0], seqs[1], seqs[3], seqs[4]]);
    let s = check(&q);
    assert_eq!(
        (s.damaged_records, s.damaged_samples),
        (1, u64::from(samples(2)))
    );
}

// ---- a real SIGKILL ----

/// Run by `a_sigkill_loses_no_returned_push` in a child process: pushes (and now and then
/// takes and acks one) until killed, reporting each returned push, and each ack before it is
/// made, on stdout.
#[test]
#[ignore = "the child of a_sigkill_loses_no_returned_push"]
fn kill9_child() {
    let Some((_, q)) = child_queue(QueueConfig {
        segment_size: 16 << 10,
        fsync_interval: Duration::from_millis(3),
        ..QueueConfig::default()
    }) else {
        return;
    };
    let mut out = std::io::stdout().lock();
    // A line of its own: the test harness printed the test's name without a newline.
    writeln!(out).expect("stdout");
    for i in 0u64.. {
        let seq = q.push(&payload(i), samples(i), i as i64).expect("push");
        writeln!(out, "pushed {seq} {i}").expect("stdout");
        if i % 3 == 0
            && let Some(r) = q.next().expect("next")
        {
            // Said before it is done: a kill between the ack and a line after it would leave
            // an ack the parent never heard of, and the record's absence would look like a loss.
            writeln!(out, "acking {}", r.seq).expect("stdout");
            q.ack(r.seq).expect("ack");
        }
    }
}

#[test]
fn a_sigkill_loses_no_returned_push() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_nanos() as u64)
        | 1;
    // Every push reported and not acked, with the index of its payload.
    let mut owed = std::collections::BTreeMap::<u64, u64>::new();
    for round in 0..4 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let stop_after = 100 + rng % 3000;
        let mut child = child_test(module_path!(), "kill9_child", d.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let mut pushes = 0;
        // Every line, also those the child wrote between the kill's decision and its landing:
        // it keeps pushing and acking until then, and an ack the parent did not read would
        // make its record's absence look like a loss.
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("line");
            let w: Vec<&str> = line.split(' ').collect();
            match w[..] {
                ["pushed", seq, i] => {
                    let seq = seq.parse().expect("seq");
                    owed.insert(seq, i.parse().expect("i"));
                    pushes += 1;
                    if pushes == stop_after {
                        // SIGKILL while the child keeps pushing (it does not wait for the pipe
                        // to be read until its buffer fills): no destructor, no last commit.
                        child.kill().expect("kill");
                    }
                }
                // Made or not when the kill landed: the record may be back or gone.
                ["acking", seq] => {
                    owed.remove(&seq.parse().expect("seq"));
                }
                _ => {}
            }
        }
        child.wait().expect("wait");
        assert!(
            pushes >= stop_after.min(100),
            "round {round}: the child pushed {pushes}"
        );
        let (q, rec) = Queue::open(d.path(), cfg()).expect("open after SIGKILL");
        assert_eq!(rec.damaged_records, 0, "round {round}: {rec:?}");
        let got = drain(&q);
        let mut seen = std::collections::BTreeSet::new();
        for r in &got {
            assert!(seen.insert(r.seq), "seq {} handed out twice", r.seq);
            if let Some(&i) = owed.get(&r.seq) {
                assert_eq!(&r.payload[..], &payload(i)[..], "seq {}", r.seq);
            }
        }
        let missing: Vec<_> = owed.keys().filter(|s| !seen.contains(s)).collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} lost: {missing:?}",
            missing.len()
        );
        check(&q);
        // This open hands nothing back: the next child sees the same records.
    }
}

// ---- throughput ----

/// `cargo test --release -- --ignored --nocapture throughput`: push (and next + ack) rates with
/// 100 KB records, on the disk under `target/`, group commit (1 s) and strict (fsync per push);
/// also the open's scan rate over what was pushed.
#[test]
#[ignore = "a figure, not a check"]
fn throughput_100kb_records() {
    const REC: usize = 100_000;
    const COUNT: usize = 3000; // 300 MB
    // Next to the test binary (target/<profile>/deps): a real disk, where /tmp may be tmpfs
    // and make fsync free.
    let exe = std::env::current_exe().expect("exe");
    let base = exe.parent().expect("the binary's directory").to_path_buf();
    for (name, interval, count, rec_size) in [
        (
            "100 KB, group commit 1 s",
            Duration::from_secs(1),
            COUNT,
            REC,
        ),
        ("100 KB, fsync every push", Duration::ZERO, COUNT / 10, REC),
        (
            "1 KB, group commit 1 s",
            Duration::from_secs(1),
            COUNT * 100,
            1000,
        ),
    ] {
        let body = vec![b'x'; rec_size];
        let d = tempfile::tempdir_in(&base).expect("tempdir");
        let c = QueueConfig {
            fsync_interval: interval,
            max_size: 4 << 30,
            ..QueueConfig::default()
        };
        let (q, _) = Queue::open(d.path(), c.clone()).expect("open");
        let t = Instant::now();
        for _ in 0..count {
            q.push(&body, 1000, 0).expect("push");
        }
        q.sync().expect("sync");
        let push = t.elapsed().as_secs_f64();
        drop(q);
        // The scan reads and checks every queued byte.
        let t = Instant::now();
        let (q, rec) = Queue::open(d.path(), c).expect("reopen");
        let open = t.elapsed().as_secs_f64();
        assert_eq!(rec.records, count as u64);
        let t = Instant::now();
        while let Some(r) = q.next().expect("next") {
            q.ack(r.seq).expect("ack");
        }
        q.sync().expect("sync");
        let drain = t.elapsed().as_secs_f64();
        let mb = (count * rec_size) as f64 / 1e6;
        println!(
            "{name}: push {:.0} MB/s, {:.0} records/s; open (scan) {:.0} MB/s; \
             next+ack {:.0} MB/s, {:.0} records/s",
            mb / push,
            count as f64 / push,
            mb / open,
            mb / drain,
            count as f64 / drain
        );
    }
}

#[test]
fn a_segment_copied_under_another_name_hands_nothing_out_twice() {
    let d = tempfile::tempdir().expect("tempdir");
    let (seqs, seg) = closed_queue(d.path());
    std::fs::copy(&seg, d.path().join(super::segment::segment_name(seqs[5]))).expect("copy");
    let rec = reopen_expect(d.path(), &seqs, &(0..N).collect::<Vec<_>>());
    assert!(rec.damaged_records >= N - 5, "{rec:?}");
}
