//! Where a sample belongs in cc-metric-store's level tree (cluster / host / type+id /
//! subtype+id), read from its metadata the way cc-metric-store reads line-protocol tags. The
//! store sink and the forwarding sinks share it, so a forwarded sample lands at the level this
//! node's own store would have put it.

use std::borrow::Cow;

use super::Sample;

/// The component below the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Component<'a> {
    /// From `type` and `type-id` metadata (`socket` and `0`): the level is `socket0`.
    Tagged { kind: &'a str, id: &'a str },
    /// From the sample's resource (an instance: `cpu0`, `eth0`, a pid), `/` made `-` since the
    /// store refuses it in level names.
    Resource(Cow<'a, str>),
}

/// A sample's level.
#[derive(Debug, Clone, PartialEq)]
pub struct Level<'a> {
    pub cluster: &'a str,
    pub host: &'a str,
    pub component: Option<Component<'a>>,
    /// From `stype`/`subtype` and `stype-id`, below a tagged component only.
    pub sub: Option<(&'a str, &'a str)>,
}

impl<'a> Level<'a> {
    /// The level of `s`: metadata `cluster`, `hostname` (or `host`), `type`+`type-id` (`type =
    /// node` is the host itself), `stype`+`stype-id`; without them `default_cluster`, `hostname`
    /// and the resource, when it is not empty.
    pub fn of(s: &'a Sample, default_cluster: &'a str, hostname: &'a str) -> Level<'a> {
        let m = &s.metadata;
        let cluster = m.get("cluster").unwrap_or(default_cluster);
        let host = m
            .get("hostname")
            .or_else(|| m.get("host"))
            .unwrap_or(hostname);
        let mut level = Level {
            cluster,
            host,
            component: None,
            sub: None,
        };
        match (m.get("type"), m.get("type-id")) {
            (Some("node"), _) => {}
            (Some(kind), Some(id)) => {
                level.component = Some(Component::Tagged { kind, id });
                let st = m.get("stype").or_else(|| m.get("subtype"));
                if let (Some(st), Some(sid)) = (st, m.get("stype-id")) {
                    level.sub = Some((st, sid));
                }
            }
            _ if !s.resource.is_empty() => {
                level.component = Some(Component::Resource(if s.resource.contains('/') {
                    s.resource.replace('/', "-").into()
                } else {
                    (&*s.resource).into()
                }));
            }
            _ => {}
        }
        level
    }

    /// The store's path: up to four level names, and how many are used. Borrowed where the
    /// sample holds the text; only composed names allocate.
    pub fn path(&self) -> ([Cow<'a, str>; 4], usize) {
        let mut path: [Cow<str>; 4] = [self.cluster.into(), self.host.into(), "".into(), "".into()];
        let mut depth = 2;
        match &self.component {
            Some(Component::Tagged { kind, id }) => {
                path[2] = format!("{kind}{id}").into();
                depth = 3;
                if let Some((st, sid)) = self.sub {
                    path[3] = format!("{st}{sid}").into();
                    depth = 4;
                }
            }
            Some(Component::Resource(r)) => {
                path[2] = r.clone();
                depth = 3;
            }
            None => {}
        }
        (path, depth)
    }
}

/// A valid Prometheus metric or label name for `name`, with `prefix` prepended: what the
/// exposition and the remote-write sink call a metric.
pub fn sanitize_metric_name(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len() + 1);
    for (i, c) in prefix.chars().chain(name.chars()).enumerate() {
        let ok = c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit());
        if i == 0 && c.is_ascii_digit() {
            out.push('_');
            out.push(c);
        } else {
            out.push(if ok { c } else { '_' });
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// Splits `hwthread12` into (`hwthread`, `12`); a name without trailing digits has no id.
pub fn split_id(s: &str) -> (&str, &str) {
    let cut = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    s.split_at(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{Metadata, Pair};

    fn with(meta: &[(&str, &str)], resource: &str) -> Sample {
        let mut s = Sample::new("m", resource, 1.0, 0);
        s.metadata = Metadata::new(
            meta.iter()
                .map(|(k, v)| -> Pair { ((*k).into(), (*v).into()) })
                .collect::<Vec<_>>(),
        );
        s
    }

    fn path_of(s: &Sample) -> Vec<String> {
        let l = Level::of(s, "local", "me");
        let (p, d) = l.path();
        p[..d].iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn levels_as_cc_metric_store_reads_tags() {
        assert_eq!(path_of(&with(&[], "")), ["local", "me"]);
        assert_eq!(path_of(&with(&[], "cpu0")), ["local", "me", "cpu0"]);
        assert_eq!(path_of(&with(&[], "a/b")), ["local", "me", "a-b"]);
        let s = with(
            &[
                ("cluster", "c"),
                ("host", "h"),
                ("type", "socket"),
                ("type-id", "1"),
                ("subtype", "core"),
                ("stype-id", "3"),
            ],
            "ignored",
        );
        assert_eq!(path_of(&s), ["c", "h", "socket1", "core3"]);
        let s = with(
            &[("hostname", "h"), ("type", "node"), ("type-id", "0")],
            "x",
        );
        assert_eq!(path_of(&s), ["local", "h"]);
    }
}
