//! `sample` holds the types every part that moves samples stands on: the [`Sample`] itself,
//! its interned [`Name`]s, [`Kind`] and [`Metadata`], and the JSON-lines form samples take on
//! the HTTP API, on `wasmon transform`'s stdin and stdout and in the log sink. It knows nothing
//! of pipelines, guests or sinks: `host` and `pipeline` both build on it, never the reverse.

mod json;
mod level;
mod name;
mod resources;
// The type's own file, beside its name and JSON forms.
#[allow(clippy::module_inception)]
mod sample;

pub use json::{
    Line, LineError, MAX_NEW_NAMES_PER_REQUEST, NameBudget, parse_line, parse_line_within, to_line,
};
pub use level::{Component, Level, sanitize_metric_name, split_id};
pub use name::{MAX_NAMES, Name, NamesFull};
pub use resources::{MAX_RESOURCES, Resources};
pub use sample::{Kind, Metadata, Pair, Sample};
