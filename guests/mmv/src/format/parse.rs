//! The checked walk over an MMV file's bytes (see `format.rs` for the layout). Every read goes
//! through `Bytes`, which returns an error instead of indexing past the end; counts are
//! bounded by the section sizes they claim, so a hostile file cannot make the parser
//! allocate or loop more than the file's own size allows.

use super::*;

#[derive(Clone, Copy)]
struct Section {
    offset: u64,
    count: u64,
    size: u64,
}

impl Section {
    /// Index of the entry starting exactly at `off`, if any.
    fn index_of(&self, off: u64) -> Option<usize> {
        let rel = off.checked_sub(self.offset)?;
        if rel % self.size != 0 || rel / self.size >= self.count {
            return None;
        }
        usize::try_from(rel / self.size).ok()
    }

    fn end(&self) -> u64 {
        // Checked against the file length when the section was read, so cannot overflow.
        self.offset + self.count * self.size
    }
}

struct Bytes<'a> {
    b: &'a [u8],
    len: u64,
}

impl Bytes<'_> {
    fn u32(&self, off: u64, what: &dyn Fn() -> String) -> Result<u32, MmvError> {
        rd_u32(self.b, off).ok_or_else(|| self.oob(what(), off, 4))
    }

    fn i32(&self, off: u64, what: &dyn Fn() -> String) -> Result<i32, MmvError> {
        self.u32(off, what).map(|v| v as i32)
    }

    fn u64(&self, off: u64, what: &dyn Fn() -> String) -> Result<u64, MmvError> {
        rd_u64(self.b, off).ok_or_else(|| self.oob(what(), off, 8))
    }

    fn oob(&self, what: String, offset: u64, len: u64) -> MmvError {
        MmvError::OutOfBounds {
            what,
            offset,
            len,
            file_len: self.len,
        }
    }

    /// A NUL-terminated string in a slot of `max` bytes at `off`.
    fn cstr(&self, off: u64, max: u64, what: &dyn Fn() -> String) -> Result<String, MmvError> {
        let start = usize::try_from(off).map_err(|_| self.oob(what(), off, max))?;
        if start >= self.b.len() {
            return Err(self.oob(what(), off, max));
        }
        let end = self.b.len().min(start.saturating_add(max as usize));
        let slot = &self.b[start..end];
        let nul = slot
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| MmvError::BadString {
                what: what(),
                offset: off,
            })?;
        String::from_utf8(slot[..nul].to_vec()).map_err(|_| MmvError::BadString {
            what: what(),
            offset: off,
        })
    }
}

struct Ctx<'a> {
    b: Bytes<'a>,
    version: u32,
    strings: Option<Section>,
}

impl Ctx<'_> {
    /// An optional string-section string (help texts): offset 0 means none.
    fn opt_string(&self, off: u64, what: &dyn Fn() -> String) -> Result<Option<String>, MmvError> {
        if off == 0 {
            Ok(None)
        } else {
            self.string(off, what).map(Some)
        }
    }

    /// A string that must be in the strings section.
    fn string(&self, off: u64, what: &dyn Fn() -> String) -> Result<String, MmvError> {
        match self.strings {
            Some(s) if off >= s.offset && off < s.end() => {
                self.b.cstr(off, STRING_SIZE.min(s.end() - off), what)
            }
            _ => Err(MmvError::BadReference {
                what: what(),
                offset: off,
                target: "strings",
            }),
        }
    }
}

/// Parses a whole MMV file.
pub fn parse(bytes: &[u8]) -> Result<MmvFile, MmvError> {
    let len = bytes.len() as u64;
    if len < HEADER_SIZE {
        return Err(MmvError::Truncated {
            what: "header",
            need: HEADER_SIZE,
            have: len,
        });
    }
    let b = Bytes { b: bytes, len };
    let hdr = || "header".to_string();
    let magic: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if magic != MAGIC {
        return Err(MmvError::BadMagic(magic));
    }
    let version = b.i32(4, &hdr)?;
    if !(1..=3).contains(&version) {
        return Err(MmvError::UnknownVersion(version));
    }
    let version = version as u32;
    let (g1, g2) = (b.u64(8, &hdr)?, b.u64(16, &hdr)?);
    if g1 == 0 || g1 != g2 {
        return Err(MmvError::Updating { g1, g2 });
    }
    let tocs = b.i32(24, &hdr)?;
    let flags = b.u32(28, &hdr)?;
    let process = b.i32(32, &hdr)?;
    let cluster = b.u32(36, &hdr)?;
    if tocs < 2 {
        let reason = format!("need at least 2 entries (metrics and values), header says {tocs}");
        return Err(MmvError::BadToc { index: 0, reason });
    }
    let toc_end = HEADER_SIZE + tocs as u64 * TOC_SIZE;
    if toc_end > len {
        return Err(MmvError::Truncated {
            what: "table of contents",
            need: toc_end,
            have: len,
        });
    }

    let (inst_size, metric_size) = if version == 1 {
        (INSTANCE1_SIZE, METRIC1_SIZE)
    } else {
        (INSTANCE2_SIZE, METRIC2_SIZE)
    };
    let mut sections: [Option<Section>; 7] = [None; 7];
    for index in 0..tocs as usize {
        let at = HEADER_SIZE + index as u64 * TOC_SIZE;
        let what = || format!("toc entry {index}");
        let kind = b.i32(at, &what)?;
        let count = b.i32(at + 4, &what)?;
        let offset = b.u64(at + 8, &what)?;
        let (name, size) = match kind {
            TOC_INDOMS => ("indoms", INDOM_SIZE),
            TOC_INSTANCES => ("instances", inst_size),
            TOC_METRICS => ("metrics", metric_size),
            TOC_VALUES => ("values", VALUE_SIZE),
            TOC_STRINGS => ("strings", STRING_SIZE),
            TOC_LABELS => ("labels", LABEL_SIZE),
            _ => {
                return Err(MmvError::BadToc {
                    index,
                    reason: format!("unknown section type {kind}"),
                });
            }
        };
        if count < 0 {
            return Err(MmvError::BadToc {
                index,
                reason: format!("negative {name} count {count}"),
            });
        }
        if sections[kind as usize].is_some() {
            return Err(MmvError::BadToc {
                index,
                reason: format!("second {name} section"),
            });
        }
        let bytes_len = count as u64 * size; // < 2^31 * 256: no overflow
        if offset.checked_add(bytes_len).is_none_or(|end| end > len)
            || (count > 0 && offset < toc_end)
        {
            return Err(b.oob(
                format!("{name} section ({count} entries)"),
                offset,
                bytes_len,
            ));
        }
        sections[kind as usize] = Some(Section {
            offset,
            count: count as u64,
            size,
        });
    }
    let metrics_sec = sections[TOC_METRICS as usize].ok_or(MmvError::MissingSection("metrics"))?;
    let values_sec = sections[TOC_VALUES as usize].ok_or(MmvError::MissingSection("values"))?;
    let ctx = Ctx {
        b,
        version,
        strings: sections[TOC_STRINGS as usize],
    };

    let (indoms, slots) = read_indoms(
        &ctx,
        sections[TOC_INDOMS as usize],
        sections[TOC_INSTANCES as usize],
    )?;
    let metrics = read_metrics(&ctx, metrics_sec, &indoms)?;
    let values = read_values(
        &ctx,
        values_sec,
        metrics_sec,
        sections[TOC_INSTANCES as usize],
        &metrics,
        &slots,
    )?;
    let labels = match sections[TOC_LABELS as usize] {
        Some(sec) => read_labels(&ctx, sec)?,
        None => Vec::new(),
    };
    Ok(MmvFile {
        version,
        generation: g1,
        flags,
        process,
        cluster,
        indoms,
        metrics,
        values,
        labels,
    })
}

/// Instance slots: for each entry of the instances section, (indom serial, instance) once
/// an indom claims it.
type Slots = Vec<Option<(u32, Instance)>>;

fn read_indoms(
    ctx: &Ctx,
    sec: Option<Section>,
    inst: Option<Section>,
) -> Result<(Vec<Indom>, Slots), MmvError> {
    let Some(sec) = sec else {
        return Ok((Vec::new(), Vec::new()));
    };
    let b = &ctx.b;
    let mut slots: Slots = vec![None; inst.map_or(0, |s| s.count as usize)];
    let mut indoms = Vec::with_capacity(sec.count as usize);
    for i in 0..sec.count {
        let at = sec.offset + i * INDOM_SIZE;
        let what = || format!("indom {i}");
        let serial = b.u32(at, &what)?;
        let count = b.u32(at + 4, &what)? as u64;
        let first = b.u64(at + 8, &what)?;
        let shorttext = ctx.opt_string(b.u64(at + 16, &what)?, &|| {
            format!("indom {serial} short help")
        })?;
        let helptext =
            ctx.opt_string(b.u64(at + 24, &what)?, &|| format!("indom {serial} help"))?;
        let mut instances = Vec::new();
        if count > 0 {
            let inst = inst.ok_or(MmvError::MissingSection("instances"))?;
            let start = inst
                .index_of(first)
                .filter(|s| (*s as u64) + count <= inst.count)
                .ok_or_else(|| MmvError::BadReference {
                    what: format!("indom {serial} ({count} instances)"),
                    offset: first,
                    target: "instances",
                })?;
            instances.reserve(count as usize);
            for (k, slot) in slots
                .iter_mut()
                .enumerate()
                .skip(start)
                .take(count as usize)
            {
                if slot.is_some() {
                    // Writers give each indom its own run of instances; sharing would let a
                    // small file claim quadratic work.
                    return Err(MmvError::BadReference {
                        what: format!("indom {serial}"),
                        offset: first,
                        target: "instances (already claimed)",
                    });
                }
                let ia = inst.offset + k as u64 * inst.size;
                let iw = || format!("instance {k}");
                let internal = b.i32(ia + 12, &iw)?;
                let external = if ctx.version == 1 {
                    b.cstr(ia + 16, NAME_MAX, &|| format!("instance {k} name"))?
                } else {
                    ctx.string(b.u64(ia + 16, &iw)?, &|| format!("instance {k} name"))?
                };
                let instance = Instance { internal, external };
                *slot = Some((serial, instance.clone()));
                instances.push(instance);
            }
        }
        indoms.push(Indom {
            serial,
            instances,
            shorttext,
            helptext,
        });
    }
    Ok((indoms, slots))
}

fn read_metrics(ctx: &Ctx, sec: Section, indoms: &[Indom]) -> Result<Vec<Metric>, MmvError> {
    let b = &ctx.b;
    let mut metrics = Vec::with_capacity(sec.count as usize);
    for i in 0..sec.count {
        let at = sec.offset + i * sec.size;
        let what = || format!("metric {i}");
        let (name, fields) = if ctx.version == 1 {
            (
                b.cstr(at, NAME_MAX, &|| format!("metric {i} name"))?,
                at + NAME_MAX,
            )
        } else {
            (
                ctx.string(b.u64(at, &what)?, &|| format!("metric {i} name"))?,
                at + 8,
            )
        };
        let item = b.u32(fields, &what)?;
        let code = b.i32(fields + 4, &what)?;
        let mtype = MetricType::from_code(code).ok_or_else(|| MmvError::BadMetricType {
            metric: name.clone(),
            code,
        })?;
        let sem = b.i32(fields + 8, &what)?;
        let mut semantics = match sem {
            // pmdammv treats an unset (0) semantics as a counter.
            0 | 1 => Semantics::Counter,
            3 => Semantics::Instant,
            4 => Semantics::Discrete,
            _ => {
                return Err(MmvError::BadSemantics {
                    metric: name.clone(),
                    code: sem,
                });
            }
        };
        let mut units = Units::from_raw(b.u32(fields + 12, &what)?);
        if mtype == MetricType::Elapsed {
            // As pmdammv exports it: a counter of microseconds.
            semantics = Semantics::Counter;
            units = Units {
                dim_time: 1,
                scale_time: 1,
                ..Units::default()
            };
        }
        let raw_indom = b.i32(fields + 16, &what)?;
        let indom = match raw_indom {
            0 | -1 => None,
            s => {
                let serial = s as u32;
                if !indoms.iter().any(|d| d.serial == serial) {
                    return Err(MmvError::UnknownIndom {
                        metric: name,
                        serial,
                    });
                }
                Some(serial)
            }
        };
        let shorttext = ctx.opt_string(b.u64(fields + 24, &what)?, &|| {
            format!("metric {name} short help")
        })?;
        let helptext = ctx.opt_string(b.u64(fields + 32, &what)?, &|| {
            format!("metric {name} help")
        })?;
        metrics.push(Metric {
            name,
            item,
            mtype,
            semantics,
            units,
            indom,
            shorttext,
            helptext,
        });
    }
    Ok(metrics)
}

fn read_values(
    ctx: &Ctx,
    sec: Section,
    metrics_sec: Section,
    inst: Option<Section>,
    metrics: &[Metric],
    slots: &Slots,
) -> Result<Vec<Value>, MmvError> {
    let b = &ctx.b;
    let mut values = Vec::with_capacity(sec.count as usize);
    for i in 0..sec.count {
        let at = sec.offset + i * VALUE_SIZE;
        let what = || format!("value {i}");
        let atom = b.u64(at, &what)?;
        let extra = b.u64(at + 8, &what)? as i64;
        let moff = b.u64(at + 16, &what)?;
        let ioff = b.u64(at + 24, &what)?;
        let metric = metrics_sec.index_of(moff).ok_or(MmvError::BadReference {
            what: format!("value {i}"),
            offset: moff,
            target: "metrics",
        })?;
        let m = &metrics[metric];
        let instance = match m.indom {
            None => None,
            Some(serial) => {
                let slot = inst
                    .and_then(|s| s.index_of(ioff))
                    .and_then(|k| slots.get(k))
                    .and_then(|s| s.as_ref());
                match slot {
                    Some((owner, instance)) if *owner == serial => Some(instance.clone()),
                    _ => {
                        let what = format!("value {i} of {} (indom {serial})", m.name);
                        return Err(MmvError::BadReference {
                            what,
                            offset: ioff,
                            target: "instances",
                        });
                    }
                }
            }
        };
        let value = match m.mtype {
            MetricType::I32 => MmvValue::I32(atom as u32 as i32),
            MetricType::U32 => MmvValue::U32(atom as u32),
            MetricType::I64 => MmvValue::I64(atom as i64),
            MetricType::U64 => MmvValue::U64(atom),
            MetricType::Float => MmvValue::Float(f32::from_bits(atom as u32)),
            MetricType::Double => MmvValue::Double(f64::from_bits(atom)),
            MetricType::String => MmvValue::String(
                ctx.opt_string(extra as u64, &|| format!("string value of {}", m.name))?
                    .unwrap_or_default(),
            ),
            MetricType::Elapsed => MmvValue::Elapsed {
                total_us: atom as i64,
                started_us: if extra < 0 { extra.checked_neg() } else { None },
            },
            MetricType::NoSupport => MmvValue::NoSupport,
        };
        values.push(Value {
            metric,
            instance,
            value,
        });
    }
    Ok(values)
}

fn read_labels(ctx: &Ctx, sec: Section) -> Result<Vec<Label>, MmvError> {
    let b = &ctx.b;
    let mut labels = Vec::with_capacity(sec.count as usize);
    for i in 0..sec.count {
        let at = sec.offset + i * LABEL_SIZE;
        let what = || format!("label {i}");
        let flags = b.u32(at, &what)?;
        let identity = b.u32(at + 4, &what)?;
        let internal = b.i32(at + 8, &what)?;
        let payload = b.cstr(at + 12, LABEL_PAYLOAD, &what)?;
        labels.push(Label {
            flags,
            identity,
            internal,
            payload,
        });
    }
    Ok(labels)
}
