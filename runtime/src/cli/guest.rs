//! `wasmon guest new|build|prepare|check`: the guest author's kit (`crate::kit`) on the command line.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Subcommand;

use crate::host::Runtime;
use crate::host::check::{self, WorldKind};
use crate::kit::{self, Lang, WorldName};

#[derive(Subcommand, Debug)]
pub enum GuestCommand {
    /// Create a guest that builds as is: a transformer that scales samples, an agent
    /// serving `NAME.up` and `NAME.calls`, or an exporter sending JSON lines.
    New {
        #[arg(long, value_enum)]
        lang: Lang,
        #[arg(long, value_enum, default_value = "transformer")]
        world: WorldName,
        /// The directory to create; its name is the guest's name.
        dir: PathBuf,
    },
    /// Build the guest in DIR (default: the current directory) with its language's toolchain.
    Build {
        dir: Option<PathBuf>,
        /// Where NAME.wasm goes (default: DIR/target/wasmon).
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Where pip/npm toolchains are installed (default: $WASMON_TOOLCHAINS, else
        /// ~/.cache/wasmon/toolchains).
        #[arg(long)]
        toolchains: Option<PathBuf>,
    },
    /// Build the bundled guests written in C or Python (all of them, or NAMES) into the cache
    /// a daemon of this user reads them from, installing componentize-py when missing: what a
    /// daemon asks for when `guest = "slurm"` is not built yet.
    Prepare {
        names: Vec<String>,
        /// Where pip toolchains are installed (as for `build`).
        #[arg(long)]
        toolchains: Option<PathBuf>,
    },
    /// Say which world a component implements, its imports, and whether this runtime loads it.
    Check {
        file: PathBuf,
        /// Read the component's WIT only: do not compile and link it (~20 s for an 18 MB
        /// component the first time; then the compile cache serves it).
        #[arg(long)]
        no_link: bool,
    },
}

/// Runs a `wasmon guest` command; `Ok(false)` when a checked component is refused.
pub fn guest(cmd: GuestCommand) -> Result<bool> {
    match cmd {
        GuestCommand::New { lang, world, dir } => {
            let name = kit::new(&dir, lang, world)?;
            println!(
                "created {} {} `{name}` in {}; build it with `wasmon guest build {}`",
                lang.name(),
                world.name(),
                dir.display(),
                dir.display()
            );
            Ok(true)
        }
        GuestCommand::Build {
            dir,
            out_dir,
            toolchains,
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let toolchains = toolchains.unwrap_or_else(kit::toolchains_dir);
            let built = kit::build(&dir, out_dir.as_deref(), &toolchains)?;
            if !built.rebuilt {
                eprintln!("{} is up to date", built.path.display());
            }
            println!("{}", built.path.display());
            Ok(true)
        }
        GuestCommand::Prepare { names, toolchains } => {
            let toolchains = toolchains.unwrap_or_else(kit::toolchains_dir);
            let names: Vec<String> = if names.is_empty() {
                kit::bundled::names().map(String::from).collect()
            } else {
                names
            };
            let cache = kit::bundled::cache_dir();
            for name in &names {
                match kit::bundled::component(name, &cache, &toolchains, true)? {
                    Some(path) => println!("{}", path.display()),
                    None => anyhow::bail!(
                        "{name:?} is not a bundled guest built from source (those are: {})",
                        kit::bundled::names().collect::<Vec<_>>().join(", ")
                    ),
                }
            }
            Ok(true)
        }
        GuestCommand::Check { file, no_link } => check_file(&file, !no_link),
    }
}

fn check_file(file: &Path, link: bool) -> Result<bool> {
    let bytes =
        std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    let what = file.display().to_string();
    let mut report = check::inspect(&bytes).map_err(|e| e.context(what.clone()))?;
    if link
        && report.accepted()
        && let Some(world) = report.world
    {
        let rt = Runtime::new(super::cli_cache_dir())?;
        if let Err(e) = check::link(&rt, &bytes, world, &what) {
            report.problems.push(format!("{e:#}"));
        }
    }
    print!("{}", report.render(&what));
    if report.world == Some(WorldKind::Agent) && report.accepted() {
        println!(
            "deploy: name it in an [[agent]] section (guest = \"NAME\") and drop NAME.wasm into guests-dir"
        );
    } else if report.accepted() {
        println!(
            "deploy: drop it into guests-dir as NAME.wasm; pipelines naming guest NAME pick it up"
        );
    }
    Ok(report.accepted())
}
