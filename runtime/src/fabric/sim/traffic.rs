//! What happens on a simulated fabric in one epoch: traffic on busy and quiet ports (a
//! port's receive counters are its peer's transmit), error bursts (random and injected), link
//! flaps, nodes powering up with zeroed counters, and the clears readers asked for. Every
//! random choice is a hash of (seed, port or link, epoch): the same seed gives the same run.

use std::sync::atomic::{AtomicU64, Ordering::*};

use super::{N_SEEN, P_CLEAR_REQ, P_CLEARED_AT, P_CLEARED_MASK, P_INJECT, SimFabric, SimSpec};

/// A 100 Gb/s link in 4-octet units per second.
const LINK_UNITS_PER_S: f64 = 12.5e9 / 4.0;
/// PortXmitWait ticks per second at full congestion: a busy port's 32-bit counter reaches
/// the 75 % clear level within seconds, so clears happen in short runs.
const WAIT_PER_S: f64 = 2.5e9;
/// Units per packet on busy ports (2 KiB MTU).
const UNITS_PER_PACKET: u64 = 512;

// Counter indices (the order of `IB_EXTENDED`).
const XMIT_DATA: usize = 0;
const RCV_DATA: usize = 1;
const XMIT_PKTS: usize = 2;
const RCV_PKTS: usize = 3;
const XMIT_WAIT: usize = 4;
const SYMBOL: usize = 5;
const LINK_RECOVERY: usize = 6;
const LINK_DOWNED: usize = 7;
const RCV_ERRORS: usize = 8;

/// splitmix64's finaliser: a well-mixed 64-bit hash.
#[inline]
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn h(seed: u64, what: u64, a: u64, b: u64) -> u64 {
    mix(seed ^ mix(what ^ mix(a ^ mix(b))))
}

const BUSY: u64 = 1;
const LOAD: u64 = 2;
const ERR: u64 = 3;
const FLAP: u64 = 4;
const WRAP: u64 = 5;

/// Whether a port carries heavy traffic (fixed for the run).
pub fn is_busy(seed: u64, busy_ppm: u32, port: usize) -> bool {
    h(seed, BUSY, port as u64, 0) % 1_000_000 < u64::from(busy_ppm)
}

/// (data units, packets, wait ticks) a port transmits in epoch `e`.
fn xmit(seed: u64, busy_ppm: u32, secs: f64, port: usize, e: u64) -> (u64, u64, u64) {
    let r = h(seed, LOAD, port as u64, e);
    if is_busy(seed, busy_ppm, port) {
        let util = 0.2 + 0.7 * ((r >> 11) as f64 / (1u64 << 53) as f64);
        let data = (util * LINK_UNITS_PER_S * secs) as u64;
        let wait = if util > 0.6 {
            ((util - 0.6) * WAIT_PER_S * secs) as u64
        } else {
            0
        };
        (data, data / UNITS_PER_PACKET + 1, wait)
    } else if r.is_multiple_of(8) {
        // A few management packets (64 bytes each).
        let pkts = 1 + (r >> 8) % 3;
        (pkts * 16, pkts, 0)
    } else {
        (0, 0, 0)
    }
}

#[inline]
fn add_wrap(c: &AtomicU64, d: u64) {
    if d != 0 {
        c.store(c.load(Relaxed).wrapping_add(d), Relaxed);
    }
}

#[inline]
fn add_sat(c: &AtomicU64, d: u64, bits: u32) {
    if d != 0 {
        let max = (1u64 << bits) - 1;
        c.store(c.load(Relaxed).saturating_add(d).min(max), Relaxed);
    }
}

/// Counters at creation: 0, except the 64-bit ones of `wrap_ppm` ports, which start within
/// 2^33 units of the top (a busy port wraps within seconds).
pub(super) fn initial_values(f: &SimFabric, spec: &SimSpec) {
    for p in 0..f.port_count() {
        let r = h(spec.seed, WRAP, p as u64, 0);
        let start = if r % 1_000_000 < u64::from(spec.wrap_ppm) {
            u64::MAX - (r >> 31)
        } else {
            0
        };
        for (c, v) in f.counters(p).iter().enumerate() {
            v.store(if c < XMIT_WAIT { start } else { 0 }, Relaxed);
        }
    }
}

/// Epoch `e`'s changes.
pub(super) fn advance(f: &SimFabric, e: u64) {
    let spec = f.spec();
    let secs = spec.epoch.as_secs_f64();
    let seed = spec.seed;
    for node in 0..f.node_count() {
        let present = f.present(node);
        let seen = f.node32(node, N_SEEN).swap(u32::from(present), AcqRel) != 0;
        if present && !seen {
            // Powered up again: every counter starts from 0.
            for p in f.ports_of(node) {
                for c in f.counters(p) {
                    c.store(0, Relaxed);
                }
            }
            f.node_reset_at(node).store(e, Release);
        }
    }
    for p in 0..f.port_count() {
        if !f.present(f.port_node(p)) {
            continue;
        }
        let cs = f.counters(p);
        let req = f.port32(p, P_CLEAR_REQ).swap(0, AcqRel);
        if req != 0 {
            for (c, v) in cs.iter().enumerate() {
                if req & (1 << c) != 0 {
                    v.store(0, Relaxed);
                }
            }
            f.port32(p, P_CLEARED_MASK).store(req, Release);
            f.port64(p, P_CLEARED_AT).store(e, Release);
        }
        if let Some(q) = f.peer(p)
            && f.present(f.port_node(q))
        {
            let link = p.min(q) as u64;
            if h(seed, FLAP, link, e) % 1_000_000 < u64::from(spec.flap_ppm) {
                add_sat(&cs[LINK_DOWNED], 1, 8);
                add_sat(&cs[LINK_RECOVERY], 1, 8);
            } else {
                let (xd, xp, xw) = xmit(seed, spec.busy_ppm, secs, p, e);
                let (rd, rp, _) = xmit(seed, spec.busy_ppm, secs, q, e);
                add_wrap(&cs[XMIT_DATA], xd);
                add_wrap(&cs[RCV_DATA], rd);
                add_wrap(&cs[XMIT_PKTS], xp);
                add_wrap(&cs[RCV_PKTS], rp);
                add_sat(&cs[XMIT_WAIT], xw, 32);
            }
        }
        let r = h(seed, ERR, p as u64, e);
        if r % 1_000_000 < u64::from(spec.error_ppm) {
            let n = 1 + (r >> 20) % 20;
            add_sat(&cs[SYMBOL], n, 16);
            add_sat(&cs[RCV_ERRORS], n / 4 + 1, 16);
        }
        let inject = f.port32(p, P_INJECT).swap(0, AcqRel);
        if inject > 0 {
            add_sat(&cs[SYMBOL], inject.into(), 16);
            add_sat(&cs[RCV_ERRORS], inject.into(), 16);
        }
    }
}
