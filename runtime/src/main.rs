use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;
use wasmon::cli::{Cli, Command, ConfigCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run { .. }) {
        // A command-line tool piped into `head` should end quietly, as pminfo does.
        // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // The daemon's `[log]` section is read before anything logs; a config that does not load
    // is reported by the daemon's start, with the default logging.
    let log = match &cli.command {
        Command::Run { config, .. } => wasmon::config::Config::load(config.as_deref())
            .map(|c| c.log)
            .unwrap_or_default(),
        _ => wasmon::logging::LogConfig::default(),
    };
    wasmon::logging::init(cli.log_format.unwrap_or(log.format), &log.level);
    let result = match cli.command {
        Command::Run {
            config,
            listen,
            data_dir,
        } => {
            // Before any thread starts: what stays resident (see `resident`).
            wasmon::resident::few_malloc_arenas();
            wasmon::resident::code_on_demand();
            wasmon::resident::drop_start_code_later();
            let opts = wasmon::daemon::RunOptions {
                config,
                listen,
                data_dir,
            };
            tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(wasmon::api::serve::run(opts, CancellationToken::new())))
                .map(|()| true)
        }
        Command::Transform {
            guest,
            params,
            deadline,
            memory,
        } => wasmon::cli::transform(&guest, params.as_deref(), deadline, memory),
        Command::Ns { command } => wasmon::cli::ns::ns(command),
        Command::Ps(args) => wasmon::procfs::ps_main(args).map(|()| true),
        Command::Notify(args) => tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(wasmon::cli::notify::notify_cli(args)))
            .map(|()| true),
        Command::Fabric(args) => tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(wasmon::cli::fabric::fabric_cli(args)))
            .map(|()| true),
        Command::Fleet(args) => tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(wasmon::cli::fleet::fleet_cli(args)))
            .map(|()| true),
        Command::Fetch { names, source } => wasmon::cli::ns::fetch(names, source),
        Command::Pmda { source } => wasmon::cli::pmda::pmda(source),
        Command::Guest { command } => wasmon::cli::guest::guest(command),
        Command::Config {
            command: ConfigCommand::Default { profile },
        } => match profile.as_deref().map(wasmon::config::profile) {
            None => {
                print!("{}", wasmon::config::DEFAULT);
                Ok(true)
            }
            Some(Ok(text)) => {
                print!("{text}");
                Ok(true)
            }
            Some(Err(e)) => Err(e),
        },
        Command::Config {
            command: ConfigCommand::Check { file },
        } => wasmon::cli::config_check(&file).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
