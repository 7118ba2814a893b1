//! SCSI devices and tapes: `hinv.map.scsi` (cluster 15) from `/proc/scsi/scsi`, each
//! `Host:` entry named `scsiH:C:I:L Type` and mapped to its block device in
//! `/sys/class/scsi_device/H:C:I:L/device/block/`; `tape.dev.*` and `hinv.ntape`
//! (cluster 71) from `/sys/class/scsi_tape/stN/stats/`.
//!
//! pmdalinux reads the scsi_device directory outside its stats path; here it is read under
//! the root like everything else. Owns these two clusters only.

use super::rows::Rows;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// `/proc/scsi/scsi` entries: (instance name, block device name).
#[derive(Default)]
pub struct Scsi {
    buf: String,
    devs: Vec<(String, String)>,
}

/// The numbers of a `Host: scsi0 Channel: 00 Id: 00 Lun: 00` line.
fn host_line(line: &str) -> Option<[u32; 4]> {
    let mut it = line.split_ascii_whitespace();
    let mut field = |key: &str, prefix: &str| -> Option<u32> {
        if it.next()? != key {
            return None;
        }
        it.next()?.strip_prefix(prefix)?.parse().ok()
    };
    Some([
        field("Host:", "scsi")?,
        field("Channel:", "")?,
        field("Id:", "")?,
        field("Lun:", "")?,
    ])
}

fn parse(text: &str) -> Vec<([u32; 4], String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("Host:") {
            continue;
        }
        let Some(addr) = host_line(line) else {
            continue;
        };
        // The entry's type is on a later line: "  Type:   Direct-Access   ANSI  SCSI revision: 05".
        let ty = lines.by_ref().find_map(|l| {
            let at = l.find("Type:")?;
            l[at + 5..]
                .split_ascii_whitespace()
                .next()
                .map(str::to_string)
        });
        let Some(ty) = ty else { break };
        out.push((addr, ty));
    }
    out
}

impl Group for Scsi {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 15
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.devs.clear();
        let mut buf = std::mem::take(&mut self.buf);
        if let Ok(text) = ctx.root.read("proc/scsi/scsi", &mut buf) {
            for ([h, c, i, l], ty) in parse(text) {
                let name = format!("scsi{h}:{c}:{i}:{l} {ty}");
                if self.devs.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                // Entries with no block device (a controller, an enclosure) are left out.
                let dir = format!("sys/class/scsi_device/{h}:{c}:{i}:{l}/device/block");
                if let Some(dev) = ctx
                    .root
                    .list(&dir)
                    .into_iter()
                    .find(|n| !n.starts_with('.'))
                {
                    self.devs.push((name, dev));
                }
            }
        }
        self.buf = buf;
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if m.item == 0 {
            out.extend(
                self.devs
                    .iter()
                    .map(|(n, d)| (n.clone(), Value::Text(d.clone()))),
            );
        }
    }
}

/// The statistics files of a tape, in item order (items 0-9).
const TAPE_FIELDS: [&str; 10] = [
    "in_flight",
    "io_ns",
    "other_cnt",
    "read_byte_cnt",
    "read_cnt",
    "read_ns",
    "resid_cnt",
    "write_byte_cnt",
    "write_cnt",
    "write_ns",
];

/// `hinv.ntape`'s item.
const NTAPE: u32 = 16;

#[derive(Default)]
pub struct Tape {
    /// Present when the root has `/sys/class`.
    devs: Rows<10>,
}

impl Group for Tape {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 71
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.devs.reset(ctx.root.path("sys/class").is_dir());
        for dev in ctx.root.list("sys/class/scsi_tape") {
            // Only stN: nstN, stNa, ... share stN's statistics.
            if !dev.starts_with("st") || !dev.ends_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let stats = format!("sys/class/scsi_tape/{dev}/stats");
            if !ctx.root.path(&stats).is_dir() {
                continue;
            }
            // pmdalinux takes strtoll's reading: leading digits, else 0.
            let counts = ctx.root.counters(&stats, TAPE_FIELDS, |text| {
                let digits = text.bytes().take_while(u8::is_ascii_digit).count();
                text[..digits].parse().unwrap_or(0)
            });
            self.devs.push(dev, counts);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        // A host with sysfs and no tapes has 0 tapes (as pmcd answers); no sysfs, no value.
        self.devs.values(m.item, NTAPE, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch, one};
    use crate::namespace::Value;

    #[test]
    fn scsi_entries_map_to_their_block_devices() {
        let (_dir, mut a) = agent(&[
            (
                "proc/scsi/scsi",
                "Attached devices:\nHost: scsi0 Channel: 00 Id: 00 Lun: 00\n  Vendor: ATA      Model: Samsung SSD 860  Rev: 4B6Q\n  Type:   Direct-Access                    ANSI  SCSI revision: 05\nHost: scsi1 Channel: 00 Id: 00 Lun: 00\n  Vendor: HL-DT-ST Model: DVDRAM GH24NSD1  Rev: LG00\n  Type:   CD-ROM                           ANSI  SCSI revision: 05\nHost: scsi2 Channel: 00 Id: 03 Lun: 00\n  Vendor: HP       Model: Ultrium 6-SCSI   Rev: 35GD\n  Type:   Sequential-Access                ANSI  SCSI revision: 06\n",
            ),
            (
                "sys/class/scsi_device/0:0:0:0/device/block/sda/dev",
                "8:0\n",
            ),
            (
                "sys/class/scsi_device/1:0:0:0/device/block/sr0/dev",
                "11:0\n",
            ),
            ("sys/class/scsi_tape/st0/stats/read_cnt", "12\n"),
            ("sys/class/scsi_tape/st0/stats/write_byte_cnt", "1048576\n"),
            ("sys/class/scsi_tape/st0/stats/in_flight", "1\n"),
            ("sys/class/scsi_tape/nst0/stats/read_cnt", "12\n"),
            ("sys/class/scsi_tape/st0a/stats/read_cnt", "12\n"),
        ]);
        // The tape drive has no block device: not listed.
        assert_eq!(
            fetch(&mut a, "hinv.map.scsi"),
            [
                (
                    "scsi0:0:0:0 Direct-Access".to_string(),
                    Value::Text("sda".into())
                ),
                ("scsi1:0:0:0 CD-ROM".to_string(), Value::Text("sr0".into())),
            ]
        );
        a.expect(
            "hinv.ntape 1
            tape.dev.read_cnt st0=12
            tape.dev.write_byte_cnt st0=1048576
            tape.dev.in_flight st0=1
            tape.dev.io_ns st0=0",
        );
        // sysfs without tapes: none.
        let (_dir, mut a) = agent(&[("sys/class/net/lo/mtu", "65536\n")]);
        assert_eq!(one(&mut a, "hinv.ntape"), Some(0.0));
        assert!(fetch(&mut a, "hinv.map.scsi").is_empty());
    }
}
