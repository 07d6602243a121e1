//! `treeline retention`: each project's retention policy, straight on the database a
//! server uses. A running server applies a policy within half a minute of its
//! setting; `apply` does it now, with progress.

use std::io::Write;

use treeline_wire::retention::{MetricsRule, RetentionPolicy, RetentionPreview};

use crate::failure::{Context, Failure, Outcome};
use crate::http::now_us;

#[derive(clap::Args)]
pub struct RetentionArgs {
    #[command(subcommand)]
    command: RetentionCommand,
    #[command(flatten)]
    database: crate::database_args::DatabaseArgs,
}

#[derive(clap::Subcommand)]
enum RetentionCommand {
    /// Keep a project's traces for N days: closed traces not updated for longer are
    /// removed (open ones never are). Says first what would go now.
    Set {
        #[arg(long)]
        project: String,
        /// Days a trace is kept after its last update (1 to 36500).
        #[arg(long)]
        traces_days: u32,
        /// What becomes of a run left with no traces: `keep` it with its metrics,
        /// or `drop` it once it has not been written to within the window.
        #[arg(long, value_enum, default_value = "keep")]
        metrics: Metrics,
        /// Say what would go, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Keep everything of a project again.
    Clear {
        #[arg(long)]
        project: String,
    },
    /// Each project's policy, with what it would remove now.
    Show,
    /// Remove now what every policy says should go, with progress, instead of
    /// waiting for a server to.
    Apply,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Metrics {
    Keep,
    Drop,
}

pub async fn run_command(args: RetentionArgs) -> Outcome {
    let store = args.database.open(false, "").await?;
    let now = now_us();
    match args.command {
        RetentionCommand::Set {
            project,
            traces_days,
            metrics,
            dry_run,
        } => {
            treeline_wire::check_project(&project).map_err(|e| Failure::msg(e.message))?;
            let policy = RetentionPolicy {
                traces_days,
                metrics: match metrics {
                    Metrics::Keep => MetricsRule::Keep,
                    Metrics::Drop => MetricsRule::Drop,
                },
            };
            policy
                .validate()
                .map_err(|e| Failure::msg(format!("--traces-days: {}", e.message)))?;
            let preview = store
                .reads()
                .retention_preview(&project, &policy, now)
                .await
                .context("cannot count what the policy would remove")?;
            println!("{}", would_go(&preview));
            if dry_run {
                println!("Dry run: project {project:?} is unchanged.");
                return Ok(());
            }
            store
                .set_retention(&project, Some(&policy), now)
                .await
                .context("cannot set the policy")?;
            println!(
                "Project {project:?}: {}. A running server applies it within a minute \
                 (or run `treeline retention apply`).",
                policy.describe()
            );
        }
        RetentionCommand::Clear { project } => {
            treeline_wire::check_project(&project).map_err(|e| Failure::msg(e.message))?;
            store
                .set_retention(&project, None, now)
                .await
                .context("cannot clear the policy")?;
            println!("Project {project:?} keeps everything.");
        }
        RetentionCommand::Show => {
            let projects = store
                .reads()
                .list_projects()
                .await
                .context("cannot list the projects")?;
            for p in projects.projects {
                match p.retention {
                    None => println!("{}: keeps everything", p.name),
                    Some(policy) => {
                        let preview = store
                            .reads()
                            .retention_preview(&p.name, &policy, now)
                            .await
                            .context("cannot count what the policy would remove")?;
                        println!("{}: {}; {}", p.name, policy.describe(), would_go(&preview));
                    }
                }
            }
        }
        RetentionCommand::Apply => {
            let mut err = std::io::stderr().lock();
            let (mut traces, mut spans, mut runs) = (0u64, 0u64, 0u64);
            while let Some(step) = store
                .retention_step(crate::purge::BATCH_ROWS, now)
                .await
                .context("cannot remove traces past the window (run the command again)")?
            {
                traces = traces.saturating_add(step.traces);
                spans = spans.saturating_add(step.spans);
                runs = runs.saturating_add(u64::from(step.run_deleted));
                // Progress, overwritten in place.
                let _ = write!(
                    err,
                    "\r  {traces} traces ({spans} spans) removed, project {:?}   ",
                    step.project
                );
            }
            let _ = writeln!(err);
            // Runs left empty go through deletion: finish their purge too.
            while store
                .purge_step(crate::purge::BATCH_ROWS)
                .await
                .context("cannot remove a deleted run's data (run the command again)")?
                .is_some()
            {}
            println!("Removed {traces} traces ({spans} spans) and {runs} runs past their window.");
            crate::purge::reclaim_saying(store.as_ref()).await?;
        }
    }
    Ok(())
}

fn would_go(p: &RetentionPreview) -> String {
    let mut out = format!(
        "past the window now: {} closed traces ({} spans) to remove",
        p.traces, p.spans
    );
    if p.open_kept > 0 {
        out.push_str(&format!(", {} open traces kept", p.open_kept));
    }
    if p.runs > 0 {
        out.push_str(&format!(", {} runs to remove whole", p.runs));
    }
    out
}
